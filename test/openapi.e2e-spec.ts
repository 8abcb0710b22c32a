import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from './support/daemon-process.js';
import { api, RunningDaemon, startDaemon } from './support/http.js';

/** The OpenAPI document (`/api/docs-json`) carries the package's version (issue 41). */
describe('the OpenAPI document', () => {
  let app: RunningDaemon;

  beforeAll(async () => {
    app = await startDaemon();
  });

  afterAll(async () => {
    await app?.close();
  });

  it("names menu-sync and the version of the package's package.json", async () => {
    const manifest = JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8'));
    const answer = await api(app.url, '/api/docs-json', null);
    expect([answer.status, answer.json.openapi, answer.json.info]).toEqual([
      200,
      '3.0.0',
      {
        title: 'menu-sync',
        description: "Mirror of an ordering platform's menus, built from an append-only event log",
        version: manifest.version,
        contact: {},
      },
    ]);
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+/);
  });
});
