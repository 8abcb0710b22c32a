/** Retries `fn` until it stops throwing (e.g. a failed expect), or rethrows its last error after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T>, timeoutMs = 5000, pauseMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (Date.now() >= deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}
