package nvml

import (
	"encoding"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
)

var (
	_ encoding.TextMarshaler   = Architecture(0)
	_ encoding.TextUnmarshaler = (*Architecture)(nil)
	_ encoding.TextMarshaler   = NVLinkDeviceType(0)
	_ encoding.TextUnmarshaler = (*NVLinkDeviceType)(nil)
	_ encoding.TextMarshaler   = P2PStatus(0)
	_ encoding.TextUnmarshaler = (*P2PStatus)(nil)
	_ encoding.TextMarshaler   = FabricState(0)
	_ encoding.TextUnmarshaler = (*FabricState)(nil)
)

func roundTrip[T interface {
	comparable
	encoding.TextMarshaler
}, P interface {
	*T
	encoding.TextUnmarshaler
}](t require.TestingT, v T) {
	b, err := v.MarshalText()
	require.NoError(t, err)
	var got T
	require.NoError(t, P(&got).UnmarshalText(b), "%q", b)
	require.Equal(t, v, got, "%q", b)
}

func TestEnumTextRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		roundTrip(t, Architecture(rapid.Uint32().Draw(t, "arch")))
		roundTrip(t, NVLinkDeviceType(rapid.Int().Draw(t, "nvlink")))
		roundTrip(t, P2PStatus(rapid.Int().Draw(t, "p2p")))
		roundTrip(t, FabricState(rapid.Uint8().Draw(t, "fabric")))
	})
}

func TestEnumText(t *testing.T) {
	b, err := ArchHopper.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "hopper", string(b))
	var a Architecture
	require.NoError(t, a.UnmarshalText([]byte("Blackwell")))
	require.Equal(t, ArchBlackwell, a)
	require.NoError(t, a.UnmarshalText([]byte("arch(17)")))
	require.Equal(t, Architecture(17), a)

	out, err := json.Marshal(map[string]any{"remote": NVLinkDeviceSwitch, "p2p": P2PNotSupported, "fabric": FabricCompleted})
	require.NoError(t, err)
	require.JSONEq(t, `{"remote":"switch","p2p":"not supported","fabric":"completed"}`, string(out))

	for _, bad := range []string{"", "quantum", "arch(", "arch(-1)", "arch(99999999999)", "state(256)"} {
		var a Architecture
		var f FabricState
		errA, errF := a.UnmarshalText([]byte(bad)), f.UnmarshalText([]byte(bad))
		require.ErrorIs(t, errA, topology.ErrParse, "%q", bad)
		require.ErrorIs(t, errF, topology.ErrParse, "%q", bad)
	}
	var p P2PStatus
	require.ErrorIs(t, p.UnmarshalText([]byte("p2pstatus(x)")), topology.ErrParse)
}
