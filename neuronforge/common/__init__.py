"""Value types and the process's settings: errors (with their outcomes), settings, progress, host timing."""
