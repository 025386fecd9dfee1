"""Load tests and chaos experiments for shardcat: Locust workloads, fault injection, invariant checks, plots."""
