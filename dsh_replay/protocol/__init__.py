"""The StreamChunk protocol: chunk values, options, the adapter base and registry, the rules, the JSONL codec, goldens and Turn. Depends on nothing else in the package but `dsh_replay.errors`."""
