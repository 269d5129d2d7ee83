-- A job without Flight Recorder dumps: the FR stages' outputs that later stages, the verdict and
-- the report read, empty (the FR stages would cost ~0.2 s of planning on every job for nothing).
-- tests/test_queries.py checks these are the columns the FR stages give.
create or replace temp table fr_divergence (
    gkey varchar, finding varchar, counter varchar, seq bigint, culprits bigint[], owner bigint, peer bigint,
    p2p_printed varchar, p2p_op varchar, pg varchar, size bigint, priority integer);
create or replace temp table fr_divergence_ops (
    rank bigint, op varchar, numel hugeint, dtype varchar, state varchar, sig varchar, seq_printed varchar);
create or replace temp table fr_facts (
    fr_pg varchar, fr_counter varchar, fr_seq varchar, fr_owner bigint, fr_peer bigint, fr_op varchar,
    fr_ops varchar, fr_in_total hugeint, fr_out_total hugeint);
create or replace temp table fr_evidence (file varchar, line bigint, k bigint);
create or replace temp table fr_coverage as select cast(0 as bigint) as dumped, cast(0 as bigint) as undumped;
