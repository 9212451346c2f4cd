// Package engine runs sequences (ADDENDUM sections 6-7): it enrols
// contacts (Enroll, and Hook on events), schedules one scheduled send per
// email step, runs due sends (Runner.Run: claim, checks in ADDENDUM 6
// order, send, advance), exits and cancels (exit conditions, Exit,
// CancelSequence, SetEnabled), and answers dry runs (DryRun).
//
// The rows are the truth; asynq tasks are only timers. Functions that
// write scheduled sends inside a transaction schedule their tasks on it
// (store.Tx.Schedule), which enqueues them after the commit,
// and the worker's sweep enqueues whatever was lost. docs/decisions.md
// ("Sequences: engine") lists the state transitions and the crash windows.
package engine
