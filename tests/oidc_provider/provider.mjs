// A real OpenID provider for the sign-in tests: the npm package oidc-provider (certified), configured
// here and listening on the loopback. Never served by Draft Desk; started by tests/oidc_provider/harness.py.
//
//   node tests/oidc_provider/provider.mjs '{"port": 18301, "clients": [...], "accounts": {...}}'
//
// clients: [{client_id, client_secret, redirect_uris}] (the code flow, client_secret_basic);
// accounts: {login: {email, name, groups}}: the login form (the package's devInteractions) takes any
// password; a login not listed signs in as itself with the email <login>@example.test and no groups.
// Prints "ready <issuer>" once it listens.
import Provider from 'oidc-provider';

const options = JSON.parse(process.argv[2] || '{}');
const port = Number(options.port);
const issuer = `http://127.0.0.1:${port}`;
const accounts = options.accounts || {};

function claimsOf(login) {
  const known = accounts[login] || {};
  return {
    sub: login,
    email: known.email || `${login}@example.test`,
    email_verified: known.email_verified ?? true,
    name: known.name || login,
    groups: known.groups || [],
  };
}

const provider = new Provider(issuer, {
  clients: (options.clients || []).map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    redirect_uris: c.redirect_uris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  })),
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return claimsOf(id); } };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // the claims the scopes ask for go into the ID token too (as Okta, Entra ID or Keycloak can be set to do)
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  ttl: { IdToken: 600, AccessToken: 600, AuthorizationCode: 60, Interaction: 600, Session: 3600, Grant: 3600 },
  // first-party clients: no consent screen (the package's documented way, a grant made when none exists)
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      return ctx.oidc.provider.Grant.find(grantId);
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
