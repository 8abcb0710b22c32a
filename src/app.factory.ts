import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { IncomingMessage } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { LogController } from 'fastify';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Logger as Pino } from 'pino';
import { AppModule } from './app.module.js';
import { ApiTokenGuard } from './common/api-token.guard.js';
import { STORED_TOKENS } from './common/stored-tokens.js';
import { ProblemDetailsFilter } from './common/problem-details.filter.js';
import { problem, PROBLEM_CONTENT_TYPE } from './common/problem-details.js';
import { registerRoleGate } from './common/role-gate.js';
import { clientErrorProblem, frameworkErrorProblem, registerInputChecks } from './common/request-input.js';
import { createValidationPipe } from './common/validation.pipe.js';
import { packageVersion } from './common/package-version.js';
import { AppConfig } from './config/app-config.js';
import { ReadRouter } from './database/read-router.service.js';
import { DeliveriesInFlight } from './ingress/deliveries-in-flight.js';
import { installDirectIngress, registerIngressRoute } from './ingress/ingress.route.js';
import { IngressService } from './ingress/ingress.service.js';
import { WebhookKeyRegistry } from './ingress/webhook-key.registry.js';
import { MetricsService } from './observability/metrics.service.js';
import { PinoNestLogger } from './observability/logger.js';
import { logRequestCompleted, requestContext, requestIdOf } from './observability/request-context.js';
import { menuDirectRoute } from './menu/menu-direct-read.js';
import { MenuDocumentService } from './menu/menu-document.service.js';
import { installDirectReads, resourceDirectRoutes } from './query/direct-reads.js';
import { ResourceQueryService } from './query/resource-query.service.js';
import type { UpstreamSettings } from './upstream/upstream-settings.js';

/** The console's built files (`npm run build` puts them in dist/console, beside dist/src). */
const CONSOLE_DIR = fileURLToPath(new URL('../console/', import.meta.url));

export interface HttpAppOptions {
  config: AppConfig;
  databaseUrl: string;
  logger: Pino;
  /** The upstream to connect to (default: the configured one). */
  upstream?: UpstreamSettings | null;
}

/** The Nest application on Fastify, fully configured but not yet listening. */
export async function createHttpApp({
  config,
  databaseUrl,
  logger,
  upstream,
}: HttpAppOptions): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    // Fastify's own lines use the root logger, not a child per request (a child per request was a
    // visible share of a hot read's cost); the root logger adds the request id (createRootLogger's mixin).
    childLoggerFactory: (root: FastifyBaseLogger) => root,
    bodyLimit: config.WEBHOOK_MAX_BODY_BYTES,
    genReqId: (request: IncomingMessage) => requestIdOf(request.headers['x-request-id']),
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors: frameworkErrorProblem,
    clientErrorHandler: clientErrorProblem,
  });
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.register({ config, databaseUrl, upstream }),
    adapter,
    {
      bodyParser: false,
      logger: new PinoNestLogger(logger),
    },
  );
  configureFastify(app.getHttpAdapter().getInstance(), config, logger, app.get(MetricsService));
  installDirectReads(
    app.getHttpAdapter().getInstance(),
    [
      ...resourceDirectRoutes(app.get(ResourceQueryService), app.get(ReadRouter)),
      menuDirectRoute(app.get(MenuDocumentService), app.get(ReadRouter)),
    ],
    // The same store as the guards Nest makes: one read of the stored tokens per process.
    new ApiTokenGuard(app.get(AppConfig), app.get(STORED_TOKENS)),
  );
  app.useGlobalFilters(new ProblemDetailsFilter());
  app.useGlobalPipes(createValidationPipe());
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('menu-sync')
      .setDescription("Mirror of an ordering platform's menus, built from an append-only event log")
      .setVersion(packageVersion())
      .addBearerAuth()
      .build(),
  );
  SwaggerModule.setup('api/docs', app, document, { jsonDocumentUrl: 'api/docs-json' });
  serveConsole(app);
  await app.init();
  registerIngressRoute(app.getHttpAdapter().getInstance(), app.get(IngressService), app.get(DeliveriesInFlight));
  // Before Fastify, so before the role gate: a process without ingress leaves webhooks to Fastify,
  // whose gate answers them 503.
  if (config.hasRole('ingress')) {
    installDirectIngress(app.getHttpServer(), app.getHttpAdapter().getInstance(), {
      ingress: app.get(IngressService),
      inFlight: app.get(DeliveriesInFlight),
      keys: app.get(WebhookKeyRegistry),
      maxBodyBytes: config.WEBHOOK_MAX_BODY_BYTES,
      logger,
    });
  }
  return app;
}

/**
 * The operator's console: static files under /console/ (no token needed to load them; the data
 * they fetch from /api takes one), and / and /console lead there.
 */
function serveConsole(app: NestFastifyApplication): void {
  if (existsSync(`${CONSOLE_DIR}index.html`)) {
    app.useStaticAssets({
      root: CONSOLE_DIR,
      prefix: '/console/',
      redirect: true,
      maxAge: '1h',
      immutable: false,
      // index.html names the hashed asset files: it is revalidated, they are cached.
      setHeaders: (reply: { header: (name: string, value: string) => void }, file: string) => {
        if (file.endsWith('.html')) reply.header('Cache-Control', 'no-cache');
      },
    } as never);
  }
  const fastify = app.getHttpAdapter().getInstance();
  fastify.get('/', (_request, reply) => reply.redirect('/console/', 302));
  // The console's pages are relative to /console/: a link to /console is led there, its query kept.
  fastify.get('/console', (request, reply) => {
    const query = request.raw.url!.indexOf('?');
    return reply.redirect(`/console/${query < 0 ? '' : request.raw.url!.slice(query)}`, 302);
  });
}

function configureFastify(fastify: FastifyInstance, config: AppConfig, logger: Pino, metrics: MetricsService): void {
  // Every body is read as raw bytes, bounded by bodyLimit as it is read (chunked bodies too);
  // the webhook route needs the exact bytes, and decides itself what it accepts.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser(
    '*',
    { parseAs: 'buffer', bodyLimit: config.WEBHOOK_MAX_BODY_BYTES },
    (_request, body, done) => done(null, body),
  );

  // While closing, requests still arriving on open connections are refused as a transient fault.
  let closing = false;
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  fastify.addHook('onRequest', (request, reply, done) => {
    requestContext.enterWith({ reqId: request.id });
    reply.header('x-request-id', request.id);
    if (!closing) return done();
    void reply
      .status(503)
      .headers({ 'Retry-After': '5', Connection: 'close', 'Content-Type': PROBLEM_CONTENT_TYPE })
      .send(problem(503, 'The daemon is shutting down; retry later.', 'unavailable'));
  });
  registerRoleGate(fastify, config.roles);
  registerInputChecks(fastify);
  fastify.addHook('onResponse', (request, reply, done) => {
    // Bodies over the limit are refused by Fastify before the ingress handler runs.
    if (reply.statusCode === 413 && request.routeOptions.url === '/webhooks/:key')
      metrics.webhookDeliveries.inc({ outcome: 'too_large' });
    logRequestCompleted(logger, {
      reqId: request.id,
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: reply.statusCode,
      ms: reply.elapsedTime,
    });
    done();
  });
}
