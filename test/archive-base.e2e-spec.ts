import { ArchiveBaseRepository } from '../src/replay/archive-base.repository.js';
import { appendNextAt, archivePartition } from './support/archived-partition.js';
import { openDataSource } from './support/database.js';
import { eventually } from './support/eventually.js';
import { api, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

const OWNER = '4400';
const JAN = '2024-01-10T12:00:00.000Z';
/** The newest occurred_at of the archived partition: the `as_of` horizon. */
const JAN_LAST = '2024-01-20T12:00:00.000Z';
const FEB = '2024-02-15T00:00:00.000Z';
const MAR = '2024-03-10T12:00:00.000Z';
const APR = '2024-04-01T00:00:00.000Z';
/** The first position of the second partition (event_log_0 holds the positions below it). */
const ABOVE = 1_000_000;

/** The `as_of` reads of one instant: pages (with deleted ones), reads by id, an expansion, /menu and orders. */
const readsAt = (at: string): Record<string, string> => ({
  [`products ${at}`]: `/api/v1/products?owner_id=${OWNER}&include_deleted=true&as_of=${at}`,
  [`live products only ${at}`]: `/api/v1/products?owner_id=${OWNER}&as_of=${at}`,
  [`product 701 ${at}`]: `/api/v1/products/701?as_of=${at}`,
  [`product 702 ${at}`]: `/api/v1/products/702?as_of=${at}`,
  [`product 703 ${at}`]: `/api/v1/products/703?as_of=${at}`,
  [`product 701 expanded ${at}`]: `/api/v1/products/701?expand=traits&as_of=${at}`,
  [`traits ${at}`]: `/api/v1/traits?owner_id=${OWNER}&include_deleted=true&as_of=${at}`,
  [`trait 7 ${at}`]: `/api/v1/traits/7?as_of=${at}`,
  [`trait 802 ${at}`]: `/api/v1/traits/802?as_of=${at}`,
  [`collections ${at}`]: `/api/v1/collections?owner_id=${OWNER}&include_deleted=true&as_of=${at}`,
  [`menu ${at}`]: `/api/v1/menu?owner_id=${OWNER}&as_of=${at}`,
  [`menu normalized ${at}`]: `/api/v1/menu?owner_id=${OWNER}&form=normalized&as_of=${at}`,
  [`orders ${at}`]: `/api/v1/orders?owner_id=${OWNER}&as_of=${at}`,
  [`order 901 ${at}`]: `/api/v1/orders/901?as_of=${at}`,
});
const READS = Object.assign({}, ...[JAN_LAST, FEB, MAR, APR].map(readsAt)) as Record<string, string>;

type Reads = Record<string, { status: number; text: string }>;

describe('as_of above the archive horizon folds the archive base (docs/reference.md §8)', () => {
  let app: RunningDaemon;
  const before: Reads = {};

  const readAll = async (): Promise<Reads> => {
    const reads: Reads = {};
    for (const [name, path] of Object.entries(READS)) {
      const answer = await api(app.url, path);
      reads[name] = { status: answer.status, text: answer.text };
    }
    return reads;
  };
  const send = async (options: Parameters<typeof webhookEvent>[0]) => {
    const answer = await deliver(app.url, webhookEvent({ ownerId: OWNER, ...options }));
    if (answer.status !== 202) throw new Error(`seeding failed: ${answer.status} ${answer.text}`);
    return answer.json.position as number;
  };
  const product = (eventType: string, subjectId: string, createdAt: string, title?: string) =>
    send({ eventType, subjectId, createdAt, attributes: title === undefined ? {} : { title } });
  const trait = (eventType: string, subjectId: string, createdAt: string, title: string) =>
    send({ eventType, subjectType: 'trait', subjectId, createdAt, attributes: { title } });

  beforeAll(async () => {
    app = await startDaemon();
    // In event_log_0, up to JAN_LAST: every resource's first versions.
    expect(await product('product.created', '701', JAN, 'Toast, archived')).toBe(1);
    await product('product.created', '702', JAN, 'Bagel, archived');
    await product('product.created', '703', JAN, 'Scone');
    await product('product.updated', '703', JAN_LAST, 'Scone, archived');
    await trait('trait.created', '7', JAN, 'Size, archived');
    await trait('trait.created', '802', JAN, 'Sauce');
    await send({ eventType: 'trait.destroyed', subjectType: 'trait', subjectId: '802', createdAt: JAN_LAST });
    await send({ eventType: 'collection.created', subjectType: 'collection', subjectId: '601', createdAt: JAN });
    await send({ eventType: 'order.created', subjectType: 'order', subjectId: '901', createdAt: JAN });
    // Above it: the same resources changed (or destroyed) later, and one made later.
    await appendNextAt(app.database.url, ABOVE);
    expect(await product('product.updated', '701', MAR, 'Toast, hot')).toBe(ABOVE);
    await send({ eventType: 'product.destroyed', subjectId: '702', createdAt: MAR });
    await trait('trait.updated', '7', MAR, 'Size, hot');
    await send({ eventType: 'collection.updated', subjectType: 'collection', subjectId: '601', createdAt: MAR });
    await send({ eventType: 'order.updated', subjectType: 'order', subjectId: '901', createdAt: MAR });
    await product('product.created', '705', MAR, 'Muffin');
    await eventually(async () => expect((await api(app.url, '/api/v1/products/705')).status).toBe(200), 15000);
    Object.assign(before, await readAll());
  }, 60000);

  afterAll(async () => {
    await app?.close();
  });

  it('the answers before archiving are the expected past', () => {
    const title = (name: string) => JSON.parse(before[name].text).attributes.title;
    expect(title(`product 701 ${FEB}`)).toBe('Toast, archived');
    expect(title(`product 701 ${APR}`)).toBe('Toast, hot');
    expect(before[`product 702 ${FEB}`].status).toBe(200);
    expect(title(`product 702 ${FEB}`)).toBe('Bagel, archived');
    expect(before[`product 702 ${APR}`].status).toBe(410);
    expect(title(`trait 7 ${FEB}`)).toBe('Size, archived');
    expect(title(`trait 7 ${MAR}`)).toBe('Size, hot');
    expect(before[`trait 802 ${FEB}`].status).toBe(410);
    const orders = (at: string) => JSON.parse(before[`orders ${at}`].text).data.map((o: { id: string }) => o.id);
    expect([orders(FEB), orders(APR)]).toEqual([['901'], ['901']]);
    expect(JSON.parse(before[`order 901 ${FEB}`].text).version.occurred_at).toBe(JAN);
    expect(JSON.parse(before[`order 901 ${APR}`].text).version.occurred_at).toBe(MAR);
    for (const [name, read] of Object.entries(before))
      if (!/^(product 702|trait 802) /.test(name) || read.status !== 410)
        expect([name, read.status]).toEqual([name, 200]);
  });

  it('after the fold into the archive base and the drop, every answer at or after the horizon is byte-equal', async () => {
    const dataSource = await openDataSource(app.database.url, 2);
    const runner = dataSource.createQueryRunner();
    try {
      const folded = await new ArchiveBaseRepository().foldIntoArchiveBase(runner, 0, ABOVE);
      expect(folded).toBe(9);
      // Idempotent: a second fold changes no row.
      const rows = async () =>
        runner.query(`SELECT * FROM proj_menu__archive_base.products ORDER BY id`) as Promise<unknown[]>;
      const once = await rows();
      expect(await new ArchiveBaseRepository().foldIntoArchiveBase(runner, 0, ABOVE)).toBe(9);
      expect(await rows()).toEqual(once);
    } finally {
      await runner.release();
      await dataSource.destroy();
    }
    await archivePartition(app.database.url, 'event_log_0');
    await eventually(async () => expect((await api(app.url, '/api/v1/events/1')).status).toBe(410), 3000);
    const after = await readAll();
    for (const name of Object.keys(READS)) expect([name, after[name]]).toEqual([name, before[name]]);
  }, 60000);
});
