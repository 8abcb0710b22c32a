import { EventLog1763700000000 } from './1763700000000-event-log.js';
import { ReadModel1763800000000 } from './1763800000000-read-model.js';
import { Connections1763900000000 } from './1763900000000-connections.js';
import { CanonicalId1764000000000 } from './1764000000000-canonical-id.js';
import { QueryScale1764100000000 } from './1764100000000-query-scale.js';
import { ChangeLog1764200000000 } from './1764200000000-change-log.js';
import { Sinks1764300000000 } from './1764300000000-sinks.js';
import { ChangeIdUnindexed1764400000000 } from './1764400000000-change-id-unindexed.js';
import { AsOfTail1764500000000 } from './1764500000000-as-of-tail.js';
import { LogEntriesPrefetched1764600000000 } from './1764600000000-log-entries-prefetched.js';
import { SinkEgressFrom1764700000000 } from './1764700000000-sink-egress-from.js';
import { SinkAttempts1764800000000 } from './1764800000000-sink-attempts.js';
import { TableSinks1764900000000 } from './1764900000000-table-sinks.js';
import { ChangeJson1765300000000 } from './1765300000000-change-json.js';
import { HorizonCachedPlan1765400000000 } from './1765400000000-horizon-cached-plan.js';
import { SinkPages1765500000000 } from './1765500000000-sink-pages.js';
import { FanOut1765600000000 } from './1765600000000-fan-out.js';
import { ApiTokens1765700000000 } from './1765700000000-api-tokens.js';
import { AuditLog1765800000000 } from './1765800000000-audit-log.js';
import { OwnerScope1765900000000 } from './1765900000000-owner-scope.js';
import { ConnectStartedBy1766100000000 } from './1766100000000-connect-started-by.js';
import { TableLayout1766200000000 } from './1766200000000-table-layout.js';
import { Activity1766400000000 } from './1766400000000-activity.js';
import { ReconcileStores1766600000000 } from './1766600000000-reconcile-stores.js';
import { PartitionedEventLog1766800000000 } from './1766800000000-partitioned-event-log.js';
import { EventLogArchive1767000000000 } from './1767000000000-event-log-archive.js';
import { ArchiveHorizon1767100000000 } from './1767100000000-archive-horizon.js';
import { ArchiveBase1767200000000 } from './1767200000000-archive-base.js';
import { ProjectionCheckpoints1766900000000 } from './1766900000000-projection-checkpoints.js';

/** Every migration, in order. A new migration is added here as well. */
export const MIGRATIONS = [
  EventLog1763700000000,
  ReadModel1763800000000,
  Connections1763900000000,
  CanonicalId1764000000000,
  QueryScale1764100000000,
  ChangeLog1764200000000,
  Sinks1764300000000,
  ChangeIdUnindexed1764400000000,
  AsOfTail1764500000000,
  LogEntriesPrefetched1764600000000,
  SinkEgressFrom1764700000000,
  SinkAttempts1764800000000,
  TableSinks1764900000000,
  ChangeJson1765300000000,
  HorizonCachedPlan1765400000000,
  SinkPages1765500000000,
  FanOut1765600000000,
  ApiTokens1765700000000,
  AuditLog1765800000000,
  OwnerScope1765900000000,
  ConnectStartedBy1766100000000,
  TableLayout1766200000000,
  Activity1766400000000,
  ReconcileStores1766600000000,
  PartitionedEventLog1766800000000,
  ProjectionCheckpoints1766900000000,
  EventLogArchive1767000000000,
  ArchiveHorizon1767100000000,
  ArchiveBase1767200000000,
];
