-- srun names GLOBAL task ids; with rank = SLURM_PROCID (the usual launch) a task is a rank.
update exits set rank = task where rank is null and task is not null and source = 'srun';
