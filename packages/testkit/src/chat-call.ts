/**
 * One small chat call through an edge with a virtual key, as a user makes it: its HTTP status
 * and the reservation id Holdfast gave it (empty when refused). `body` overrides the defaults.
 */
export async function chatCall(
  edgeUrl: string,
  key: string,
  body: Record<string, unknown> = {},
): Promise<{ status: number; reservation: string }> {
  const res = await fetch(`${edgeUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      ...body,
    }),
  });
  await res.arrayBuffer();
  return { status: res.status, reservation: res.headers.get('x-holdfast-reservation-id') ?? '' };
}
