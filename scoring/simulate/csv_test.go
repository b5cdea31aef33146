package simulate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

const nodeCSV = `sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,64000,262144,2,P100
openb-node-0001,32000,262144,0,
openb-node-0002,96000,393216,8,G2
`

const podCSV = `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
openb-pod-0002,16000,32768,1,1000,V100M16|V100M32,LS,Running,9967058,9968575,9967063
openb-pod-0003,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
openb-pod-0004,4000,8192,0,0,,BE,Pending,1,2,
`

// the 5-column variant of the multigpu pod lists
const pod5CSV = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\r\n" +
	"openb-pod-0000,12000,16384,1,1000\r\n" +
	"openb-pod-0001,6000,12288,2,1000\r\n"

func TestReadNodes(t *testing.T) {
	nodes, err := ReadNodes(context.Background(), strings.NewReader(nodeCSV))
	require.NoError(t, err)
	// memory_mib is read as bytes
	assert.Equal(t, []Node{
		{Name: "openb-node-0000", CPUMilli: 64000, MemoryBytes: 256 << 30, GPUs: 2, Model: "P100"},
		{Name: "openb-node-0001", CPUMilli: 32000, MemoryBytes: 256 << 30, GPUs: 0, Model: ""},
		{Name: "openb-node-0002", CPUMilli: 96000, MemoryBytes: 384 << 30, GPUs: 8, Model: "G2"},
	}, nodes)
}

func TestReadPods(t *testing.T) {
	pods, err := ReadPods(context.Background(), strings.NewReader(podCSV))
	require.NoError(t, err)
	assert.Equal(t, []Pod{
		{Name: "openb-pod-0000", CPUMilli: 12000, MemoryBytes: 16384 << 20, GPUs: 1, GPUMilli: 1000},
		{Name: "openb-pod-0001", CPUMilli: 6000, MemoryBytes: 12288 << 20, GPUs: 1, GPUMilli: 460},
		{Name: "openb-pod-0002", CPUMilli: 16000, MemoryBytes: 32768 << 20, GPUs: 1, GPUMilli: 1000, Models: "V100M16|V100M32"},
		{Name: "openb-pod-0003", CPUMilli: 88000, MemoryBytes: 327680 << 20, GPUs: 8, GPUMilli: 1000},
		{Name: "openb-pod-0004", CPUMilli: 4000, MemoryBytes: 8192 << 20},
	}, pods)
	assert.True(t, pods[1].Sharing())
	assert.False(t, pods[0].Sharing())
	assert.EqualValues(t, 8000, pods[3].TotalGPUMilli())

	five, err := ReadPods(context.Background(), strings.NewReader(pod5CSV))
	require.NoError(t, err)
	require.Len(t, five, 2, "5-column list")
	assert.Equal(t, Pod{Name: "openb-pod-0001", CPUMilli: 6000, MemoryBytes: 12 << 30, GPUs: 2, GPUMilli: 1000}, five[1])
}

// TestReadLargestMemory: the largest memory_mib a list may hold converts to
// bytes without overflow; one more is refused.
func TestReadLargestMemory(t *testing.T) {
	const header = "sn,cpu_milli,memory_mib,gpu,model\n"
	nodes, err := ReadNodes(context.Background(), strings.NewReader(header+fmt.Sprintf("a,1,%d,1,T4\n", int64(maxMemoryMiB))))
	require.NoError(t, err)
	assert.Equal(t, int64(1)<<60, nodes[0].MemoryBytes)
	_, err = ReadNodes(context.Background(), strings.NewReader(header+fmt.Sprintf("a,1,%d,1,T4\n", int64(maxMemoryMiB)+1)))
	require.ErrorIs(t, err, ErrParse)
}

func TestReadRejectsMalformed(t *testing.T) {
	nodeHeader := "sn,cpu_milli,memory_mib,gpu,model\n"
	podHeader := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	cases := []struct {
		name   string
		pods   bool
		input  string
		line   int
		column string
		says   string
	}{
		{"empty", false, "", 1, "", "empty input"},
		{"no rows", false, nodeHeader, 1, "", "no nodes"},
		{"missing column", false, "sn,cpu_milli,memory_mib,gpu\nn,1,1,1\n", 1, "model", "missing column"},
		{"duplicate column", true, "name,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", 1, "name", "twice"},
		{"short row", false, nodeHeader + "a,1,1,1,T4\nb,1,1\n", 3, "", "wrong number of fields"},
		{"bad quote", false, nodeHeader + "a,1,1,1,T4\n\"b,1,1,1,T4\n", 3, "", ""},
		{"not a number", false, nodeHeader + "a,1,1,1,T4\nb,x,1,1,T4\n", 3, "cpu_milli", "not an integer"},
		{"fraction", false, nodeHeader + "b,1.5,1,1,T4\n", 2, "cpu_milli", "not an integer"},
		{"negative", false, nodeHeader + "b,1,-1,1,T4\n", 2, "memory_mib", "outside"},
		{"too many GPUs", false, nodeHeader + "b,1,1,65,T4\n", 2, "gpu", "outside"},
		{"GPU without model", false, nodeHeader + "b,1,1,2,\n", 2, "model", "no GPU model"},
		{"model without GPU", false, nodeHeader + "b,1,1,0,T4\n", 2, "model", "no GPUs"},
		{"empty name", false, nodeHeader + ",1,1,0,\n", 2, "sn", "empty"},
		{"duplicate node", false, nodeHeader + "a,1,1,0,\na,1,1,0,\n", 3, "sn", "already on line 2"},
		{"share too big", true, podHeader + "p,1,1,1,1001,\n", 2, "gpu_milli", "outside 1..1000"},
		{"share zero", true, podHeader + "p,1,1,1,0,\n", 2, "gpu_milli", "outside 1..1000"},
		{"share on CPU pod", true, podHeader + "p,1,1,0,500,\n", 2, "gpu_milli", "num_gpu 0"},
		{"fractional multi-GPU", true, podHeader + "p,1,1,2,500,\n", 2, "gpu_milli", "whole GPUs"},
		{"spec on CPU pod", true, podHeader + "p,1,1,0,0,T4\n", 2, "gpu_spec", "without GPUs"},
		{"duplicate pod", true, podHeader + "p,1,1,0,0,\nq,1,1,0,0,\np,1,1,0,0,\n", 4, "name", "already on line 2"},
		{"empty value", true, podHeader + "p,,1,0,0,\n", 2, "cpu_milli", "empty value"},
		{"quoted newline keeps numbering", true, podHeader + "\"p\nq\",1,1,0,0,\nr,1,1,x,0,\n", 4, "num_gpu", "not an integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.pods {
				_, err = ReadPods(context.Background(), strings.NewReader(c.input))
			} else {
				_, err = ReadNodes(context.Background(), strings.NewReader(c.input))
			}
			require.ErrorIs(t, err, ErrParse)
			require.ErrorIs(t, err, topology.ErrParse)
			require.NotErrorIs(t, err, ErrRead)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, c.line, pe.Line, "line")
			assert.Equal(t, c.column, pe.Column, "column")
			assert.Contains(t, err.Error(), c.says)
		})
	}
}

func TestReadAcceptsVariants(t *testing.T) {
	// BOM, CRLF, reordered and extra columns, "nan" models, pandas floats
	in := "\xef\xbb\xbfmodel,gpu,extra,sn,memory_mib,cpu_milli\r\nnan,0,x,a,1,2.0\r\nT4,2,y,b,3,4\r\n"
	nodes, err := ReadNodes(context.Background(), strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []Node{
		{Name: "a", CPUMilli: 2, MemoryBytes: 1 << 20},
		{Name: "b", CPUMilli: 4, MemoryBytes: 3 << 20, GPUs: 2, Model: "T4"},
	}, nodes)
	pods, err := ReadPods(context.Background(), strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,2,1,300,|A||B|\nq,1,2,1,300,nan\n"))
	require.NoError(t, err)
	assert.Equal(t, "A|B", pods[0].Models, "gpu_spec")
	assert.Empty(t, pods[1].Models, "gpu_spec nan")
}

func FuzzReadPods(f *testing.F) {
	f.Add(podCSV)
	f.Add(pod5CSV)
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1001\n")
	f.Fuzz(func(t *testing.T, in string) {
		pods, err := ReadPods(context.Background(), strings.NewReader(in))
		if err != nil {
			var pe *ParseError
			if !errors.Is(err, ErrParse) || !errors.As(err, &pe) || pe.Line < 0 {
				t.Fatalf("error %v is not a located ErrParse", err)
			}
			return
		}
		for _, p := range pods {
			if err := validPod(&p); err != nil || p.Name == "" {
				t.Fatalf("accepted an invalid pod %+v: %v", p, err)
			}
		}
	})
}

func FuzzReadNodes(f *testing.F) {
	f.Add(nodeCSV)
	f.Add("sn,cpu_milli,memory_mib,gpu,model\na,1,1,65,T4\n")
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ReadNodes(context.Background(), strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v is not ErrParse", err)
			}
			return
		}
		for _, n := range nodes {
			if n.Name == "" || n.CPUMilli < 0 || n.MemoryBytes < 0 || n.GPUs < 0 || n.GPUs > MaxGPUsPerNode || (n.GPUs > 0) != (n.Model != "") {
				t.Fatalf("accepted an invalid node %+v", n)
			}
		}
	})
}
