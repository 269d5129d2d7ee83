-- A job with no traceback or stack dump frame of a known rank (most pastes): blocked_calls.sql's
-- outputs that the rules read, empty, as blocked_calls.sql leaves them without a frame (its
-- ~30 ms of planning would find nothing). tests/test_queries.py checks these are the columns
-- blocked_calls.sql gives.
create or replace temp table blocked_calls (rank bigint, call varchar, file varchar, line bigint);
create or replace temp table call_minority (rank bigint, call varchar, majority_call varchar);
create or replace temp table site_minority (
    rank bigint, file varchar, line bigint, call varchar, site varchar, majority_site varchar);
create or replace temp table left_behind (rank bigint, call varchar, site varchar);
create or replace temp table path_minority (rank bigint, file varchar, line bigint, site varchar);
