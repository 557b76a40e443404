// Package poison overwrites memory given back for reuse, in builds with
// the ringpoison tag, so that a read of a slice after its memory went
// back (to a pool, or to the kernel as a provided buffer) shows a
// recognisable pattern at once instead of stale bytes, or another
// connection's.
//
// Without the tag, Enabled is false and Fill is an empty function that
// the compiler inlines away: the calls cost nothing in a normal build.
// Code that would do more than call Fill (walk a list to find the bytes)
// checks Enabled first, a constant, so the walk is compiled out too.
package poison
