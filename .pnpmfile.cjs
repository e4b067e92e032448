// Holdfast runs on Node >= 20.19 (package.json engines; the suite runs on 20.20). Two
// dependencies declare Node >= 22 without needing it, and pnpm warned at every install:
// - @nats-io/nuid 3.0.0 (NATS v3 client): it only needs globalThis.crypto.getRandomValues,
//   which Node has had since 19;
// - cookie 2.0.2 (fastify's inject, via light-my-request): plain string code, no Node API.
// Both are checked on Node 20 (docs/operations.md, "Node versions"). This hook states their
// real requirement for exactly those versions; a new version gets its own check first.
const NODE_20_OK = new Set(['@nats-io/nuid@3.0.0', 'cookie@2.0.2']);

module.exports = {
  hooks: {
    readPackage(pkg) {
      if (NODE_20_OK.has(`${pkg.name}@${pkg.version}`)) {
        pkg.engines = { ...pkg.engines, node: '>=20.19' };
      }
      return pkg;
    },
  },
};
