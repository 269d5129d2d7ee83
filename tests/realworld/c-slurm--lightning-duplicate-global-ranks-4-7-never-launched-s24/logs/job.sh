#!/bin/bash
#SBATCH --job-name=ddp_check
#SBATCH --ntasks=2
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=02:00:00
#SBATCH --output=slurm-%j.out

srun singularity exec --nv --overlay /scratch/jk7702/overlay-25GB.ext3:ro /scratch/work/public/singularity/cuda11.3.0-cudnn8-devel-ubuntu20.04.sif \
    /bin/bash -c "source /ext3/env.sh; python /scratch/jk7702/projects/seq2seq/ddp_check/test.py --gpus 4 --num_nodes 2"
