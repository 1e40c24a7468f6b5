//! Source: Linux `perf_event_open` sampling, unwinding and symbolization → pprof.
