import type { ExplanationShape } from '../../api/shapes.ts';

/**
 * An explanation as `slipway lease explain` and `lease create --dry-run`
 * print it: the summary, then per blueprint each reason and, under it, the
 * change that would grant the lease now.
 */
export function renderExplanation(explanation: ExplanationShape): string {
  const lines = [explanation.summary];
  for (const at of explanation.blueprints) {
    lines.push('', `at ${at.blueprint}: ${at.grantedNow ? `granted now (${at.where})` : 'not granted now'}`);
    for (const reason of at.reasons) {
      lines.push(`  ${reason.kind}: ${reason.says}`);
      if (reason.change !== null) lines.push(`    → ${reason.change}`);
    }
  }
  return lines.join('\n');
}
