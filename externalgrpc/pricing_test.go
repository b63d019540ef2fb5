package externalgrpc_test

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/internal/pricetest"
)

// catalogue reads a server type's cores, memory and hourly net price in a
// location from the fake's API, independently of the server under test.
func (e *env) catalogue(serverType, location string) (cores, memoryGB, hourly float64) {
	e.t.Helper()
	st, _, err := e.fake.Client().ServerType.GetByName(e.t.Context(), serverType)
	if err != nil || st == nil {
		e.t.Fatalf("server type %s: %v, %v", serverType, st, err)
	}
	for _, p := range st.Pricings {
		if p.Location.Name == location {
			hourly, err = strconv.ParseFloat(p.Hourly.Net, 64)
			if err != nil {
				e.t.Fatal(err)
			}
			return float64(st.Cores), float64(st.Memory), hourly
		}
	}
	e.t.Fatalf("server type %s has no price in %s", serverType, location)
	return 0, 0, 0
}

func TestPricingNodePrice(t *testing.T) {
	e := newEnv(t, envOptions{})
	start := epoch
	end := epoch.Add(2 * time.Hour)
	_, _, batchHourly := e.catalogue("cx23", "nbg1")
	_, _, armHourly := e.catalogue("cax11", "hel1")
	templateOfBatch := &protos.ExternalGrpcNode{Name: "template-node-for-batch-1",
		Labels: map[string]string{"cluster-autoscaler.kubernetes.io/template-node": "true", config.LabelNodeGroup: "batch"}}
	armNode := &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(e.armServer, 10), Name: "arm-0000000000000001"}

	for _, tc := range []struct {
		name     string
		req      *protos.PricingNodePriceRequest
		want     float64
		wantCode codes.Code
	}{
		{"template node by its pool label", &protos.PricingNodePriceRequest{Node: templateOfBatch,
			StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)}, 2 * batchHourly, codes.OK},
		{"server by provider ID, legacy time fields", &protos.PricingNodePriceRequest{Node: armNode,
			StartTime: timestamppb.New(start), EndTime: timestamppb.New(end)}, 2 * armHourly, codes.OK},
		{"current time fields win over legacy ones", &protos.PricingNodePriceRequest{Node: armNode,
			StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end),
			StartTime: timestamppb.New(start), EndTime: timestamppb.New(start.Add(10 * time.Hour))}, 2 * armHourly, codes.OK},
		{"node of no pool", &protos.PricingNodePriceRequest{Node: &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(e.controlPlane, 10)},
			StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)}, 0, codes.NotFound},
		{"end before start", &protos.PricingNodePriceRequest{Node: armNode,
			StartTimestamp: timestamppb.New(end), EndTimestamp: timestamppb.New(start)}, 0, codes.InvalidArgument},
		{"no times", &protos.PricingNodePriceRequest{Node: armNode}, 0, codes.InvalidArgument},
		{"no node", &protos.PricingNodePriceRequest{StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(end)}, 0, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.client.PricingNodePrice(e.ctx(), tc.req)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code = %s (%v); want %s", got, err, tc.wantCode)
			}
			if !approx(res.GetPrice(), tc.want) {
				t.Errorf("price = %v; want %v", res.GetPrice(), tc.want)
			}
		})
	}
}

func TestPricingPodPrice(t *testing.T) {
	e := newEnv(t, envOptions{})
	// The documented rate: half of a pool's hourly price buys its cores,
	// half its memory; the cheapest pool per unit sets each rate.
	rate := externalgrpc.Rate{PerCore: math.Inf(1), PerGiB: math.Inf(1)}
	for _, p := range []struct{ serverType, location string }{{"cpx21", "fsn1"}, {"cx23", "nbg1"}, {"cax11", "hel1"}} {
		cores, mem, hourly := e.catalogue(p.serverType, p.location)
		rate.PerCore = min(rate.PerCore, hourly/2/cores)
		rate.PerGiB = min(rate.PerGiB, hourly/2/mem)
	}
	pod := pricetest.PodWith("1", "2Gi")
	b, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := 2 * (1*rate.PerCore + 2*rate.PerGiB)
	start, end := timestamppb.New(epoch), timestamppb.New(epoch.Add(2*time.Hour))

	for _, tc := range []struct {
		name     string
		req      *protos.PricingPodPriceRequest
		want     float64
		wantCode codes.Code
	}{
		{"current fields", &protos.PricingPodPriceRequest{PodBytes: b, StartTimestamp: start, EndTimestamp: end}, want, codes.OK},
		{"legacy fields (CA <= 1.34)", &protos.PricingPodPriceRequest{Pod: b, StartTime: start, EndTime: end}, want, codes.OK},
		{"no pod", &protos.PricingPodPriceRequest{StartTimestamp: start, EndTimestamp: end}, 0, codes.InvalidArgument},
		{"pod bytes that do not decode", &protos.PricingPodPriceRequest{PodBytes: []byte{0xff, 0xff}, StartTimestamp: start, EndTimestamp: end}, 0, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.client.PricingPodPrice(e.ctx(), tc.req)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code = %s (%v); want %s", got, err, tc.wantCode)
			}
			if !approx(res.GetPrice(), tc.want) {
				t.Errorf("price = %v; want %v", res.GetPrice(), tc.want)
			}
		})
	}
	// Every pod of the shared table costs what its requests cost at the
	// rate, as the in-tree adapter prices it.
	for _, tc := range pricetest.Pods() {
		t.Run(tc.Name, func(t *testing.T) {
			b, err := tc.Pod.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.client.PricingPodPrice(e.ctx(), &protos.PricingPodPriceRequest{PodBytes: b, StartTimestamp: start, EndTimestamp: end})
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.Price(rate, 2*time.Hour); !approx(res.GetPrice(), want) {
				t.Errorf("price = %v; want %v (%v cores, %v GiB)", res.GetPrice(), want, tc.Cores, tc.GiB)
			}
		})
	}
}

func TestPodPrice(t *testing.T) {
	rate := externalgrpc.Rate{PerCore: 0.01, PerGiB: 0.005}
	for _, tc := range pricetest.Pods() {
		t.Run(tc.Name, func(t *testing.T) {
			if got, want := externalgrpc.PodPrice(tc.Pod, rate, time.Hour), tc.Price(rate, time.Hour); !approx(got, want) {
				t.Errorf("PodPrice = %v; want %v (%v cores, %v GiB)", got, want, tc.Cores, tc.GiB)
			}
		})
	}
	t.Run("price scales with time", func(t *testing.T) {
		if got, want := externalgrpc.PodPrice(pricetest.PodWith("1", "1Gi"), rate, 90*time.Minute), 1.5*(0.01+0.005); !approx(got, want) {
			t.Errorf("PodPrice = %v; want %v", got, want)
		}
	})
}

func ExamplePodPrice() {
	// A pool of 2-core, 4 GB servers at 0.008 an hour: half of the price
	// buys the cores, half the memory.
	rate := externalgrpc.Rate{PerCore: 0.008 / 2 / 2, PerGiB: 0.008 / 2 / 4}
	half := pricetest.PodWith("1", "2Gi")
	whole := pricetest.PodWith("2", "4Gi")
	fmt.Printf("half a server for a day: %.4f\n", externalgrpc.PodPrice(half, rate, 24*time.Hour))
	fmt.Printf("a whole server for a day: %.4f\n", externalgrpc.PodPrice(whole, rate, 24*time.Hour))
	// Output:
	// half a server for a day: 0.0960
	// a whole server for a day: 0.1920
}

func approx(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
