/** What a secret (a webhook key, a token, a client secret) is replaced with wherever text is kept or shown: logs, errors, kept bodies. */
export const REDACTED = '[redacted]';
