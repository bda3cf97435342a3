//go:build integration

package etcdstore_test

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestCheckAccessWithAuthentication turns etcd's authentication on and
// checks that a user whose role covers the prefix connects and passes,
// while one whose role covers another prefix is refused at the check,
// naming the prefix, although the cluster's health read lets it in.
func TestCheckAccessWithAuthentication(t *testing.T) {
	e, root := etcdtest.Start(t)
	ctx := t.Context()
	keys, err := etcdstore.NewKeys("/sg-access/")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "gateway"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "gateway", keys.Root(), clientv3.GetPrefixRangeEnd(keys.Root()), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "gateway", "gateway-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "gateway", "gateway"); return err },
		func() error { _, err := root.RoleAdd(ctx, "other"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "other", "/other/", clientv3.GetPrefixRangeEnd("/other/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "other", "other-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "other", "other"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	connect := func(user, pw string) *clientv3.Client {
		cli, err := etcdstore.ConnectSecure(ctx, e.Endpoints(), 5*time.Second, etcdstore.Credentials{Username: user, Password: pw}, nil)
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	if err := etcdstore.CheckAccess(ctx, connect("gateway", "gateway-pw"), keys); err != nil {
		t.Errorf("a user with readwrite on %s: %v", keys.Root(), err)
	}
	err = etcdstore.CheckAccess(ctx, connect("other", "other-pw"), keys)
	if err == nil || !strings.Contains(err.Error(), keys.Root()) {
		t.Errorf("a user without the prefix: CheckAccess = %v, want a refusal naming %s", err, keys.Root())
	}
	if _, err := etcdstore.ConnectSecure(ctx, e.Endpoints(), 5*time.Second, etcdstore.Credentials{Username: "gateway", Password: "wrong"}, nil); err == nil {
		t.Error("a wrong password connected")
	}
}
