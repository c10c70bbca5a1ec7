"""patchkit's benchmark harness: medians over repeated subprocess runs, each against a baseline."""
