"""Signing in and out, and who am I: auth's pages and JSON routes (issue 42 item 3).

They sit above webapp/web/ (templating, dependencies, CSP), whose dependencies read auth's
`Principal`; auth itself (users, sessions, tokens, OIDC, the audit log) sits below web. The URLs,
templates (templates/auth/) and OpenAPI tag ("auth") are unchanged by the move.
"""
