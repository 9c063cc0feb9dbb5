"""The top: the app factory, the command line, background jobs and error pages."""
