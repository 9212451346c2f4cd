// Package experiments holds the pure rules of ADDENDUM 20: who is in which
// variant or branch (a hash of two ids, so the same contact lands in the
// same place however often it is asked), which variant wins, and the 95%
// Wilson score interval the stats show. It does no I/O; the broadcast
// snapshot computes the same assignment in SQL (AssignSQL), and a test
// holds the two to the same answers.
package experiments

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
)

// bucketBits is how many bits of the hash place an id: 48 bits are exact
// in a float64 and in a bigint product with the number of variants, so Go
// and PostgreSQL compute the same integers.
const bucketBits = 48

// span is the number of buckets.
const span = uint64(1) << bucketBits

// Bucket places id under seed (a broadcast's or a sequence's id) in
// [0, 2^48): the first 48 bits of SHA-256(seed ":" id). Uniform, and
// independent between seeds, so one contact's variant in one broadcast
// says nothing of its variant in the next.
func Bucket(seed, id string) uint64 {
	h := sha256.Sum256([]byte(seed + ":" + id))
	var b [8]byte
	copy(b[2:], h[:6])
	return binary.BigEndian.Uint64(b[:])
}

// Threshold is the number of buckets below which an id is in a test group
// of the given fraction (0-1).
func Threshold(fraction float64) uint64 {
	if fraction <= 0 {
		return 0
	}
	if fraction >= 1 {
		return span
	}
	return uint64(math.Floor(fraction * float64(span)))
}

// Assign is the variant (0..variants-1) of id in a broadcast's test group
// of the given fraction, or -1 when it is in the rest (it waits for the
// winner). The test group is the lowest buckets; within it the buckets are
// cut in equal runs, one per variant, so the split is even by weight.
func Assign(seed, id string, fraction float64, variants int) int {
	return assignBucket(Bucket(seed, id), Threshold(fraction), variants)
}

func assignBucket(b, threshold uint64, variants int) int {
	if variants <= 0 || b >= threshold {
		return -1
	}
	return int(b * uint64(variants) / threshold)
}

// AssignSQL is Assign as a PostgreSQL expression over the seed and id
// expressions given, with $threshold and $variants the placeholders of
// Threshold's value (bigint) and the variant count (bigint): it yields the
// 0-based variant, or -1. The broadcast snapshot uses it so that one
// INSERT ... SELECT assigns a whole audience.
func AssignSQL(seed, id, threshold, variants string) string {
	b := BucketSQL(seed, id)
	return "(CASE WHEN " + b + " < " + threshold + " THEN (" + b + " * " + variants + ") / " + threshold + " ELSE -1 END)"
}

// BucketSQL is Bucket as a PostgreSQL bigint expression.
func BucketSQL(seed, id string) string {
	return "(('x' || left(encode(sha256(convert_to(" + seed + " || ':' || " + id + ", 'UTF8')), 'hex'), 12))::bit(48)::bigint)"
}

// Branch is one branch of a sequence split and its weight in percent.
type Branch struct {
	Name   string
	Weight int
}

// Split is the branch of id under seed among branches whose weights sum
// to 100: the buckets are cut in runs proportional to the weights, in the
// order given. "" when there is no branch (weights summing to 0).
func Split(seed, id string, branches []Branch) string {
	total := 0
	for _, b := range branches {
		total += b.Weight
	}
	if total <= 0 {
		return ""
	}
	// Scaled to the total, so a split whose weights do not quite sum to
	// 100 still uses every bucket.
	at := Bucket(seed, id) * uint64(total) / span
	acc := uint64(0)
	for _, b := range branches {
		acc += uint64(b.Weight)
		if at < acc {
			return b.Name
		}
	}
	return branches[len(branches)-1].Name
}

// holdoutSalt keeps the holdout draw apart from the split's: a contact's
// chance of being held out does not depend on its branch.
const holdoutSalt = "holdout"

// InHoldout says whether id falls in a sequence's holdout of percent
// (0-50) under seed.
func InHoldout(seed, id string, percent int) bool {
	if percent <= 0 {
		return false
	}
	return Bucket(seed+":"+holdoutSalt, id)*100 < uint64(percent)*span
}
