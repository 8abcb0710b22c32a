import { appendNextAt, ArchivedPartition, archivePartition, restorePartition } from './support/archived-partition.js';
import { runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { Answer, api, deliver, RunningDaemon, sendJson, startDaemon } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

const OWNER = '4300';
const JAN = '2024-01-10T12:00:00.000Z';
/** The newest occurred_at of the archived partition: the `as_of` horizon. */
const JAN_LAST = '2024-01-20T12:00:00.000Z';
const JAN_MID = '2024-01-15T00:00:00.000Z';
const FEB = '2024-02-15T00:00:00.000Z';
const MAR = '2024-03-10T12:00:00.000Z';
const APR = '2024-04-01T00:00:00.000Z';
/** The first position of the second partition (event_log_0 holds the positions below it). */
const ABOVE = 1_000_000;
const FILE = 'event_log_0.ndjson.gz';

/** The reads compared before and after archiving. */
const READS = {
  livePage: `/api/v1/products?owner_id=${OWNER}`,
  pageFeb: `/api/v1/products?owner_id=${OWNER}&as_of=${FEB}`,
  byIdFeb: `/api/v1/products/501?as_of=${FEB}`,
  expandedFeb: `/api/v1/products/501?expand=traits&as_of=${FEB}`,
  menuFeb: `/api/v1/menu?owner_id=${OWNER}&as_of=${FEB}`,
  menuAtHorizon: `/api/v1/menu?owner_id=${OWNER}&as_of=${JAN_LAST}`,
  menuApr: `/api/v1/menu?owner_id=${OWNER}&as_of=${APR}`,
  collectionsApr: `/api/v1/collections?owner_id=${OWNER}&as_of=${APR}`,
  above: `/api/v1/events/${ABOVE}`,
  aboveRaw: `/api/v1/events/${ABOVE}/raw`,
  owners: '/api/v1/owners',
};
/** Reads older than the horizon: answered before archiving, 410 while archived. */
const OLD = {
  archived: '/api/v1/events/1',
  archivedRaw: '/api/v1/events/2/raw',
  pageJan: `/api/v1/products?owner_id=${OWNER}&as_of=${JAN_MID}`,
  byIdJan: `/api/v1/products/501?as_of=${JAN_MID}`,
  expandedJan: `/api/v1/products/501?expand=traits&as_of=${JAN_MID}`,
  collectionJan: `/api/v1/collections/601?as_of=${JAN_MID}`,
  menuJan: `/api/v1/menu?owner_id=${OWNER}&as_of=${JAN_MID}`,
  ordersJan: `/api/v1/orders?as_of=${JAN_MID}`,
};

/** What a scoped token reads, above and across the horizon. */
const SCOPED = {
  pageFeb: READS.pageFeb,
  menuFeb: READS.menuFeb,
  pageJan: OLD.pageJan,
  archived: OLD.archived,
};

type Reads = Record<string, { status: number; text: string }>;

describe('reads across the archive horizon (docs/reference.md §8)', () => {
  let app: RunningDaemon;
  let archived: ArchivedPartition;
  /** A read token scoped to OWNER: its reads go through Nest, whose guard sets the scope. */
  let scoped: string;
  const before: Reads = {};
  const scopedBefore: Reads = {};

  const get = (path: string) => api(app.url, path);
  const readAll = async (paths: Record<string, string>, token?: string): Promise<Reads> => {
    const reads: Reads = {};
    for (const [name, path] of Object.entries(paths)) {
      const answer = await api(app.url, path, token);
      reads[name] = { status: answer.status, text: answer.text };
    }
    return reads;
  };
  const send = async (options: Parameters<typeof webhookEvent>[0]) => {
    const answer = await deliver(app.url, webhookEvent({ ownerId: OWNER, ...options }));
    if (answer.status !== 202) throw new Error(`seeding failed: ${answer.status} ${answer.text}`);
    return answer.json.position as number;
  };
  const expectGone = (answer: Answer, archivedBefore: number | string, detail: string) => {
    expect(answer.status).toBe(410);
    expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(answer.json).toEqual({
      type: 'urn:menu-sync:problem:archived',
      title: 'Gone',
      status: 410,
      detail,
      archived_before: archivedBefore,
      archive_file: FILE,
    });
  };
  const positionDetail = (position: number) =>
    `Position ${position} is archived: the log holds the positions from ${ABOVE} on, and this one is in the archive file ${FILE} (menu-sync archive restore puts its range back).`;
  const asOfDetail = `as_of ${JAN_MID} is older than the archive horizon: events that occurred up to ${JAN_LAST} are in the archive (newest file ${FILE}), so the state at that instant cannot be folded from the log. Ask for an as_of at or after ${JAN_LAST}.`;

  beforeAll(async () => {
    app = await startDaemon();
    // In event_log_0: the history up to JAN_LAST.
    expect(await send({ eventType: 'product.created', subjectId: '501', createdAt: JAN })).toBe(1);
    await send({ eventType: 'collection.created', subjectType: 'collection', subjectId: '601', createdAt: JAN });
    await send({ eventType: 'product.created', subjectId: '502', createdAt: JAN_LAST });
    // Above it: resources made later (an archived resource changed later is the limit docs/reference.md §8 names).
    await appendNextAt(app.database.url, ABOVE);
    expect(await send({ eventType: 'product.created', subjectId: '503', createdAt: MAR })).toBe(ABOVE);
    await send({ eventType: 'collection.created', subjectType: 'collection', subjectId: '602', createdAt: MAR });
    await eventually(async () => expect((await get('/api/v1/collections/602')).status).toBe(200), 15000);
    const made = await sendJson(app, 'POST', '/api/v1/tokens', { name: 'one owner', role: 'read', owner_ids: [OWNER] });
    expect(made.status).toBe(201);
    scoped = made.json.token;
    Object.assign(before, await readAll({ ...READS, ...OLD }));
    Object.assign(scopedBefore, await readAll(SCOPED, scoped));
    expect(Object.values(scopedBefore).map((read) => read.status)).toEqual([200, 200, 200, 200]);
    for (const [name, read] of Object.entries(before)) expect([name, read.status]).toEqual([name, 200]);
    archived = await archivePartition(app.database.url, 'event_log_0', { file: FILE, bytes: 12345, keep: true });
  }, 60000);

  afterAll(async () => {
    await app?.close();
  });

  it('the archive reaches the running daemon by NOTIFY, well before its 30 s poll', async () => {
    expect(archived).toEqual({
      partition: 'event_log_0',
      lowerBound: 0,
      upperBound: ABOVE,
      file: FILE,
      bytes: 12345,
      events: 3,
      lastOccurredAt: new Date(JAN_LAST),
    });
    await eventually(async () => expect((await get(OLD.archived)).status).toBe(410), 3000);
  });

  it('/events/{position} and /raw of an archived position: 410 naming the horizon and the file', async () => {
    expectGone(await get(OLD.archived), ABOVE, positionDetail(1));
    expectGone(await get(OLD.archivedRaw), ABOVE, positionDetail(2));
    // Below the horizon but never written: the log cannot tell, the archive may.
    expectGone(await get(`/api/v1/events/${ABOVE - 1}`), ABOVE, positionDetail(ABOVE - 1));
    // Above the horizon, a position not written yet is still not found.
    expect((await get(`/api/v1/events/${ABOVE + 50}`)).status).toBe(404);
  });

  it('as_of older than the horizon: 410 on resources, pages, expansions, orders and /menu', async () => {
    for (const path of [OLD.pageJan, OLD.byIdJan, OLD.expandedJan, OLD.collectionJan, OLD.menuJan, OLD.ordersJan])
      expectGone(await get(path), JAN_LAST, asOfDetail);
  });

  it('every read above the horizon answers as it did before archiving', async () => {
    expect(await readAll(READS)).toEqual(Object.fromEntries(Object.keys(READS).map((name) => [name, before[name]])));
    // GET /api/v1/owners counts the archived events too: it reads event_log_owners, not the log.
    expect(JSON.parse(before.owners.text)).toEqual({
      data: [{ owner_id: OWNER, events: 5, first_occurred_at: JAN, last_occurred_at: MAR }],
    });
  });

  it('a token scoped to owners reads the same: unchanged above the horizon, 410 across it', async () => {
    expect(await readAll({ pageFeb: SCOPED.pageFeb, menuFeb: SCOPED.menuFeb }, scoped)).toEqual({
      pageFeb: scopedBefore.pageFeb,
      menuFeb: scopedBefore.menuFeb,
    });
    expectGone(await api(app.url, SCOPED.pageJan, scoped), JAN_LAST, asOfDetail);
    expectGone(await api(app.url, SCOPED.archived, scoped), ABOVE, positionDetail(1));
  });

  it('the status report shows the horizon and the archive', async () => {
    expect((await get('/api/v1/status')).json.archive).toEqual({
      horizon: ABOVE,
      as_of_before: JAN_LAST,
      files: 1,
      bytes: 12345,
      newest_file: FILE,
      restored: 0,
    });
    const screen = await runCli(['status', '--interval-ms', '0'], {
      DATABASE_URL: app.database.url,
      WEBHOOK_KEYS: app.process.env.WEBHOOK_KEYS ?? '',
    });
    expect(screen.stdout).toContain(
      `Archive  horizon ${ABOVE} (as_of from ${JAN_LAST}), 1 file(s), 12.1 KiB, newest ${FILE}\n`,
    );
  }, 60000);

  it('a restored range answers as before archiving', async () => {
    await restorePartition(app.database.url, archived);
    await eventually(async () => expect((await get(OLD.menuJan)).status).toBe(200), 3000);
    expect(await readAll({ ...READS, ...OLD })).toEqual(before);
    expect((await get('/api/v1/status')).json.archive).toEqual({
      horizon: 0,
      as_of_before: null,
      files: 0,
      bytes: 0,
      newest_file: null,
      restored: 1,
    });
  });
});
