// A real OpenID Connect provider (the `oidc-provider` package, as certified
// by the OpenID Foundation) for the user portal's end-to-end test,
// crates/deskbroker/tests/it/portal.rs. Started by the test as
// `node provider.js`; everything it needs comes from the environment:
//
//   OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI  the broker's client
//   OIDC_ACCOUNTS   JSON {"login": {"preferred_username": …, "email": …,
//                   "groups": [...]}, …}: the accounts that can sign in
//   OIDC_HOST       the loopback address it listens on and its issuer names
//                   (default 127.0.0.1)
//
// It listens on a free loopback port and prints `listening on ISSUER` once
// it serves. Sign-in uses the package's development interactions: a login
// form (`login`, `password`) and a consent form, plain HTML a headless
// browser fills. The ID token carries the granted scopes' claims
// (conformIdTokenClaims: false), `groups` among them for the `groups`
// scope. Keys are made anew at each start (RS256).

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`provider.js: ${name} is not set`);
    process.exit(2);
  }
  return value;
};

const accounts = JSON.parse(env('OIDC_ACCOUNTS'));
const host = process.env.OIDC_HOST || '127.0.0.1';
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' };

const server = createServer();
server.listen(0, host, () => {
  const issuer = `http://${host}:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: env('OIDC_CLIENT_ID'),
      client_secret: env('OIDC_CLIENT_SECRET'),
      redirect_uris: [env('OIDC_REDIRECT_URI')],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    claims: {
      openid: ['sub'],
      profile: ['preferred_username', 'name'],
      email: ['email', 'email_verified'],
      groups: ['groups'],
    },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    features: { devInteractions: { enabled: true } },
    async findAccount(ctx, id) {
      const account = accounts[id];
      if (!account) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, ...account };
        },
      };
    },
  });
  server.on('request', provider.callback());
  console.log(`listening on ${issuer}`);
  // Anything the package logs from now on goes to stderr.
  console.log = console.error;
});

// The test ends it with SIGTERM (its own child, by pid).
process.on('SIGTERM', () => server.close(() => process.exit(0)));
