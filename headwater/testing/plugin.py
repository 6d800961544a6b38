"""The pytest plugin (entry point ``pytest11``): registers the kit's fixtures."""
