"""HTTP infrastructure shared by every domain: templating, links, CSRF/headers, dependencies, static files."""
