// npm puts node_modules/.bin first on PATH, so scripts run on the pinned Node 24.
// A different major means the pinned toolchain is not installed: fail loudly.
const major = Number(process.versions.node.split('.')[0]);
if (major !== 24) {
  console.error(
    `capstan: scripts must run on Node.js 24 (found ${process.version}). Run \`npm ci\` to install the pinned toolchain.`,
  );
  process.exit(1);
}
