"""The top: the app factory, the command line, background jobs, cross-domain flows and error pages."""
