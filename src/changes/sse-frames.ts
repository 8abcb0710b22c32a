import type { ServerResponse } from 'node:http';
import { Connection, createEventBuffer } from 'better-sse';

/** What the client waits before reconnecting, sent first (better-sse's default). */
const RETRY_MS = 2000;

/**
 * Server-Sent Events frames written straight to a response, framed by better-sse's EventBuffer
 * (the field order, the splitting of data by line, the sanitising the specification asks). One
 * buffer serves every stream of the process: a frame is built and taken in one synchronous step.
 * A better-sse Session per stream held its own Request, Response, two Headers, a URL and an
 * AbortController, copied from the request: 3–4 KiB a client, idle, for nothing a stream here
 * uses (the keep-alive comments are SseHeartbeat's, the resumption is the feed's).
 */
const buffer = createEventBuffer({ serializer: (data) => (typeof data === 'string' ? data : JSON.stringify(data)) });

function take(): string {
  const text = buffer.read();
  buffer.clear();
  return text;
}

/** Sends the head (better-sse's SSE headers, and those already set on `response`) and the retry field. */
export function openEventStream(response: ServerResponse): void {
  response.socket?.setNoDelay(true);
  response.writeHead(200, { ...Connection.constants.RESPONSE_HEADERS, ...response.getHeaders() });
  buffer.retry(RETRY_MS).dispatch();
  response.write(take());
}

/** Writes one event; `json` is the data's text as it is. */
export function writeEvent(response: ServerResponse, event: string, json: string, id: string): void {
  buffer.event(event).id(id).data(json).dispatch();
  response.write(take());
}
