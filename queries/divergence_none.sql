-- A job whose logs print no sequence counter (seq_rows is empty: most pastes) and no DETAIL report
-- with the monitored barrier's fingerprint: divergence.sql's outputs that the rules, the evidence
-- and the report read, empty, as divergence.sql leaves them there (its ~50 ms of planning would
-- find nothing). speaking_ranks is read only beside a divergence. tests/test_queries.py checks
-- these are the columns divergence.sql gives.
create or replace temp table speaking_ranks (pg varchar, rank bigint);
create or replace temp table seq_groups (
    pg varchar, counter varchar, seq bigint, op varchar, numel bigint, dtype varchar, ranks bigint[], n bigint);
create or replace temp table sequence_ahead (pg varchar, counter varchar, seq bigint, ranks bigint[]);
create or replace temp table left_in_completed (pg varchar, counter varchar, rank bigint, seq bigint);
create or replace temp table divergence (pg varchar, counter varchar, seq bigint, split boolean);
create or replace temp table main_process_split (rank integer, op varchar, others_op varchar);
create or replace temp table ranks_past (rank bigint);
create or replace temp table shifted (pg varchar, counter varchar, seq bigint, rank bigint, seen boolean);
