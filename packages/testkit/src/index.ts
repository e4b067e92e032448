export * from './ports.js';
export * from './wait-for.js';
export * from './local-servers.js';
export * from './resolve-infra.js';
export * from './fixtures.js';
export * from './child.js';
