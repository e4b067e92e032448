/**
 * Anthropic's prompt cache as the mock keeps it: a prefix (up to a `cache_control` breakpoint)
 * is a key, live until its TTL passes; a hit refreshes the TTL, as Anthropic's does.
 */
export class PromptCache {
  private readonly entries = new Map<string, { expiresAt: number; ttlMs: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  has(key: string): boolean {
    const entry = this.entries.get(key);
    if (!entry) return false;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return false;
    }
    return true;
  }

  /** A hit: the entry lives another TTL from now. */
  touch(key: string): void {
    const entry = this.entries.get(key);
    if (entry) entry.expiresAt = this.now() + entry.ttlMs;
  }

  write(key: string, ttlMs: number): void {
    const live = this.entries.get(key);
    // A 1-hour entry is not shortened by a later 5-minute write of the same prefix.
    const ttl = Math.max(ttlMs, live && live.expiresAt > this.now() ? live.ttlMs : 0);
    this.entries.set(key, { expiresAt: this.now() + ttl, ttlMs: ttl });
  }

  clear(): void {
    this.entries.clear();
  }
}
