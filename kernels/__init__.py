"""The kernel ladder: versions, build, launch, bench, tune."""
