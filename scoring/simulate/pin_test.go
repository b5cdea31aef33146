package simulate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/shareddata"
)

// digest hashes everything a replay answers: every pod's node and GPUs
// (and the bandwidth it got, when the node has a topology) and every
// step's arrived, allocated and fragmented GPU, bit for bit.
func digest(r *Result) string {
	h := sha256.New()
	var buf [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	put(uint64(len(r.Placements)))
	for j, pl := range r.Placements {
		put(uint64(int64(pl.Node)))
		put(uint64(pl.GPUs))
		if b := pl.Bandwidth; b != nil {
			for _, v := range []float64{b.Ring, b.BestRing, b.Aggregate, b.BestAggregate} {
				put(math.Float64bits(v))
			}
		}
		st := r.Steps[j]
		put(uint64(st.ArrivedGPUMilli))
		put(uint64(st.AllocatedGPUMilli))
		put(math.Float64bits(st.FragGPUMilli))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pinnedDigests are the digests of replays made before the replay's
// speed-ups (class scoring, indexed candidates): policy, then tie-break,
// then workload. Any change to what a replay answers changes them. Print
// the table with GPUTOPO_PIN_PRINT=1 (only after a change that is meant
// to move the answers, and say why in the commit).
var pinnedDigests = map[string]string{
	"trace/Random/first":        "630b8b41d24b2341",
	"trace/Random/random":       "630b8b41d24b2341",
	"trace/DotProd/first":       "76e101f5be4e2a97",
	"trace/DotProd/random":      "a203d52db83e8de2",
	"trace/Clustering/first":    "1e507041cdf650eb",
	"trace/Clustering/random":   "70064c9cbdf7d0ed",
	"trace/Packing/first":       "6571fd8c2a650080",
	"trace/Packing/random":      "e7a1cddc444ae628",
	"trace/BestFit/first":       "ac5fee2fa00e4caa",
	"trace/BestFit/random":      "0014ac50b76db027",
	"trace/FGD/first":           "6bf580a0d95f216d",
	"trace/FGD/random":          "b89db26b1af5d1a1",
	"trace/Lookahead/first":     "c562f656bfcaa66e",
	"trace/Lookahead/random":    "2abb8342adf009b6",
	"default/Random/first":      "3f86de25f4b6af4d",
	"default/Random/random":     "3f86de25f4b6af4d",
	"default/DotProd/first":     "fa285ed162dcf9b9",
	"default/DotProd/random":    "f27ed7e3aef0cf9d",
	"default/Clustering/first":  "a51ee64a7a72f7ec",
	"default/Clustering/random": "e9ab1f6890c40070",
	"default/Packing/first":     "54f8f6cd3be602a7",
	"default/Packing/random":    "0fe4dccb10030ec5",
	"default/BestFit/first":     "a302c84f4e80e1ad",
	"default/BestFit/random":    "0cb52f83c6810cf8",
	"default/FGD/first":         "61b91ae49ca86483",
	"default/FGD/random":        "59b0ad8c94a93955",
	"default/Lookahead/first":   "c462cf252b4f2f60",
	"default/Lookahead/random":  "21842eec433132f6",
	"mix/Random/first":          "2f4fa276dae20285",
	"mix/Random/random":         "2f4fa276dae20285",
	"mix/DotProd/first":         "dade14fb536b5675",
	"mix/DotProd/random":        "85955e350bb8fbd8",
	"mix/Clustering/first":      "0391ac1622a3a606",
	"mix/Clustering/random":     "83b23a317c7c81ed",
	"mix/Packing/first":         "ef6b871bf09c4152",
	"mix/Packing/random":        "53d517b91259cc31",
	"mix/BestFit/first":         "7b47d03b478f0b05",
	"mix/BestFit/random":        "13b1e06636f08998",
	"mix/FGD/first":             "522bb85bc4fdce91",
	"mix/FGD/random":            "d4ab95b72b316beb",
	"mix/Lookahead/first":       "45dc9f63626ed7a4",
	"mix/Lookahead/random":      "6dae345785b16426",
}

// checkPinned replays every policy with both tie-breaks (seed 42) and
// compares each replay's digest with the pinned one.
func checkPinned(t *testing.T, name string, nodes []Node, pods []Pod) {
	t.Helper()
	print := os.Getenv("GPUTOPO_PIN_PRINT") != ""
	for _, tie := range []TieBreak{TieFirst, TieRandom} {
		res, err := ReplayAll(context.Background(), Experiment{Nodes: nodes, Pods: pods, Policies: allPolicies(), Seeds: []int64{42}, Config: Config{TieBreak: tie}})
		require.NoError(t, err)
		for _, r := range res {
			key := fmt.Sprintf("%s/%s/%s", name, r.Policy, tie)
			got := digest(r)
			if print {
				fmt.Printf("\t%q: %q,\n", key, got)
				continue
			}
			assert.Equal(t, pinnedDigests[key], got, "%s: the replay's answers changed", key)
		}
	}
}

// TestPinnedAnswersTrace pins every policy's placements on the paper's
// trace (seed 42, both tie-breaks); it skips without ../shared.
func TestPinnedAnswersTrace(t *testing.T) {
	if _, ok := shareddata.Dir(); !ok {
		t.Skip("../shared is missing: the trace's answers are pinned by this test only where it is")
	}
	nodes, pods := readTrace(t, "openb_node_list_gpu_node.csv")
	checkPinned(t, "trace", nodes, pods)
}

// TestPinnedAnswersSynthetic pins every policy's placements on two
// synthetic workloads of 300 nodes: the trace's shape, and a mix with
// pinned, shared and multi-GPU pods (Lookahead's reservation at work).
func TestPinnedAnswersSynthetic(t *testing.T) {
	nodes, pods := synthetic(t, 300, 1)
	checkPinned(t, "default", nodes, pods)
	nodes, pods, err := SyntheticMix(context.Background(), 300, 2, Mix{Pinned: 0.25, Shared: 0.5, Multi: 0.2})
	require.NoError(t, err)
	checkPinned(t, "mix", nodes, pods)
}
