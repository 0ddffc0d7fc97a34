import { expect, test } from 'vitest';
import { formatSelector, LabelsSchema, matches, mismatch, parseSelector, SelectorSyntaxError, whyNeverMatches } from '../../src/domain/labels.ts';

// The label-selector grammar (Kubernetes'), matching, and the check that
// refuses a selector nothing can match.
test('every operator of the grammar reads and matches as Kubernetes has it', () => {
  const labels = { os: 'linux', arch: 'arm64', gpu: 'a100', 'example.com/tier': 'gold' };
  const cases: Array<[string, boolean]> = [
    ['os=linux', true],
    ['os==linux', true],
    ['os!=linux', false],
    ['os!=windows', true],
    ['zone!=eu', true],
    ['arch in (amd64, arm64)', true],
    ['arch notin (amd64,arm64)', false],
    ['zone notin (eu)', true],
    ['zone in (eu)', false],
    ['gpu', true],
    ['!gpu', false],
    ['!spot', true],
    ['example.com/tier=gold', true],
    ['os=linux, gpu=a100, !spot', true],
    ['os=linux,gpu=t4', false],
    ['empty=', false],
  ];
  for (const [text, expected] of cases) expect(matches(parseSelector(text), labels), text).toBe(expected);
  expect(matches(parseSelector('empty='), { empty: '' })).toBe(true);
});

test('a selector has one canonical text', () => {
  expect(formatSelector(parseSelector(' os == linux ,arch in(arm64,amd64, arm64), !spot,ssd'))).toBe('os=linux, arch in (arm64, amd64), !spot, ssd');
  expect(formatSelector(parseSelector('zone notin (eu)'))).toBe('zone!=eu');
});

test('a selector that cannot be read is refused saying what is wrong, where, and what would be right', () => {
  const problem = (text: string) => {
    try {
      parseSelector(text);
    } catch (error) {
      expect(error).toBeInstanceOf(SelectorSyntaxError);
      return (error as Error).message;
    }
    throw new Error(`"${text}" was read`);
  };
  expect(problem('os=linux,')).toBe('a label key is missing at character 10 of "os=linux,"; expected e.g. "gpu=a100, os in (linux, bsd), !spot"');
  expect(problem('os in linux')).toMatch(/^"in" needs a list of values in parentheses at character 7/);
  expect(problem('os in (linux')).toMatch(/^expected "," or "\)" in the list of values/);
  expect(problem('os=linux gpu=a100')).toMatch(/^expected "," between requirements/);
  expect(problem('-os=linux')).toMatch(/is not a label key/);
  expect(problem('os=-linux')).toMatch(/"-linux" is not a label value/);
});

test('labels are checked key by key', () => {
  expect(LabelsSchema.safeParse({ os: 'linux', 'example.com/tier': 'gold' }).success).toBe(true);
  const bad = LabelsSchema.safeParse({ 'bad key': 'x' });
  expect(bad.success).toBe(false);
  expect(bad.error!.issues[0]!.message).toMatch(/"bad key" is not a label key/);
});

test('a mismatch says which requirement failed and why; a selector no resource can have is found in advance', () => {
  expect(mismatch(parseSelector('os=linux, gpu=a100'), { os: 'linux', gpu: 't4' })).toBe('gpu=a100, but gpu is t4');
  expect(mismatch(parseSelector('gpu'), { os: 'linux' })).toBe('gpu, but there is no gpu label');
  expect(mismatch(parseSelector('os=linux'), { os: 'linux' })).toBeUndefined();
  // Known label sets (a static pool's entries): one must match.
  const entries = [{ gpu: 'a100' }, { gpu: 't4' }];
  expect(whyNeverMatches(parseSelector('gpu=t4, os=linux'), { os: 'linux' }, entries)).toBeUndefined();
  expect(whyNeverMatches(parseSelector('gpu=h100'), { os: 'linux' }, entries)).toBe('gpu=h100, but gpu is a100; gpu=h100, but gpu is t4');
  // A driver that may report any labels: only the blueprint's own keys are judged.
  expect(whyNeverMatches(parseSelector('gpu=h100, os=linux'), { os: 'linux' }, undefined)).toBeUndefined();
  expect(whyNeverMatches(parseSelector('gpu=h100, os=bsd'), { os: 'linux' }, undefined)).toBe('os=bsd, but os is linux');
});
