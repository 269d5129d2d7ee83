-- NCCL's bootstrap picks one interface per process (`Bootstrap : Using docker0:172.17.0.1<0>`).
-- Where processes of different hosts announce the same address, it is one that every host has
-- for itself (Docker's bridge, a loopback, a NAT'd container address): the others cannot reach a
-- rank through it, so the communicator's set-up hangs or fails. Those lines are the set-up's
-- error (init_error), whatever their level; the job's configuration, not one rank's fault.
update events set kind = 'init_error'
where kind = 'nccl' and contains(text, 'Bootstrap : Using ')
  and regexp_extract(text, 'Bootstrap : Using (?:\[\d+\])?\S+?:([\d.]+)<', 1) in (
      select regexp_extract(text, 'Bootstrap : Using (?:\[\d+\])?\S+?:([\d.]+)<', 1) as address from events
      where kind = 'nccl' and contains(text, 'Bootstrap : Using ') and host is not null
      group by address having address <> '' and count(distinct host) > 1);
