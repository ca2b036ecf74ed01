/** What every bench section reports: figures, each with its target (if any) and the command that reproduces it. */
import { cpus, loadavg } from 'node:os'

export interface Target {
  /** `max`: the figure must be at most `value`; `min`: at least. */
  readonly kind: 'max' | 'min'
  readonly value: number
}

export interface Figure {
  readonly section: string
  readonly name: string
  readonly value: number
  readonly unit: string
  readonly target?: Target
  /** What the figure was measured against, the spread of rounds, and so on. */
  readonly detail?: string
  /** The command that measures this figure again. */
  readonly command: string
}

export type Verdict = 'PASS' | 'FALLS SHORT' | ''

export function verdictOf(figure: Figure): Verdict {
  if (!figure.target) return ''
  const { kind, value } = figure.target
  return (kind === 'max' ? figure.value <= value : figure.value >= value) ? 'PASS' : 'FALLS SHORT'
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** A figure rounded for reading: 3 significant digits, thousands grouped. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value)
  const magnitude = Math.abs(value)
  const digits = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 })
}

export function formatTarget(target: Target | undefined, unit: string): string {
  if (!target) return ''
  return `${target.kind === 'max' ? '≤' : '≥'} ${formatNumber(target.value)}${unit === 'x' ? 'x' : ` ${unit}`}`
}

export function formatValue(figure: Figure): string {
  return figure.unit === 'x' ? `${formatNumber(figure.value)}x` : `${formatNumber(figure.value)} ${figure.unit}`
}

/** How busy the machine was over the last 5 minutes, for a figure's detail: "load average 3.2 on 2 cores". */
export function machineLoad(): string {
  return `load average ${loadavg()[1]!.toFixed(1)} on ${cpus().length} cores over the run's last 5 minutes`
}
