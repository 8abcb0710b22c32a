# syntax=docker/dockerfile:1.7
# Production image: an external PostgreSQL (DATABASE_URL) is expected; the embedded one is for laptops.
# Node 24 LTS: docs/runtime.md says why.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY migrations ./migrations
COPY console ./console
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim AS runtime
# No built-in emulator in production: without UPSTREAM_* set, the daemon ingests hand-registered
# webhooks (WEBHOOK_KEYS) only. Set SANDBOX=true to try the image with the emulator.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/var/lib/menu-sync \
    SANDBOX=false
WORKDIR /app
RUN groupadd --system menu-sync && useradd --system --gid menu-sync --home-dir /app menu-sync \
    && mkdir -p /var/lib/menu-sync && chown menu-sync:menu-sync /var/lib/menu-sync
COPY --from=build --chown=menu-sync:menu-sync /app/package.json ./
COPY --from=build --chown=menu-sync:menu-sync /app/node_modules ./node_modules
COPY --from=build --chown=menu-sync:menu-sync /app/dist ./dist
COPY --chown=menu-sync:menu-sync bin ./bin
# `menu-sync <command>` in the container (docker exec … menu-sync status), as the package's bin.
RUN ln -s /app/bin/menu-sync.js /usr/local/bin/menu-sync
USER menu-sync
EXPOSE 3000
VOLUME ["/var/lib/menu-sync"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--max-semi-space-size=32", "dist/src/main.js"]
CMD ["serve"]
