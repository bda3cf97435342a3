package harness

import (
	"context"
	"fmt"
	"net/url"

	"github.com/minio/madmin-go/v3"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

// AddUser creates a MinIO user with secret and a policy of its own (an
// IAM policy document in JSON, named after the user) attached to it,
// through MinIO's admin API, whose payloads madmin encrypts.
func (m *MinIO) AddUser(ctx context.Context, name, secret, policyJSON string) error {
	adm, err := m.admin()
	if err != nil {
		return err
	}
	if err := adm.AddUser(ctx, name, secret); err != nil {
		return fmt.Errorf("harness: add MinIO user %s: %w", name, err)
	}
	policy := "policy-" + name
	if err := adm.AddCannedPolicy(ctx, policy, []byte(policyJSON)); err != nil {
		return fmt.Errorf("harness: add MinIO policy %s: %w", policy, err)
	}
	if _, err := adm.AttachPolicy(ctx, madmin.PolicyAssociationReq{Policies: []string{policy}, User: name}); err != nil {
		return fmt.Errorf("harness: attach policy %s to %s: %w", policy, name, err)
	}
	return nil
}

// SetUserPolicy replaces the policy of a MinIO user made by AddUser with
// policyJSON.
func (m *MinIO) SetUserPolicy(ctx context.Context, name, policyJSON string) error {
	adm, err := m.admin()
	if err != nil {
		return err
	}
	if err := adm.AddCannedPolicy(ctx, "policy-"+name, []byte(policyJSON)); err != nil {
		return fmt.Errorf("harness: set MinIO user %s's policy: %w", name, err)
	}
	return nil
}

// SetUserSecret changes the secret of a MinIO user made by AddUser.
func (m *MinIO) SetUserSecret(ctx context.Context, name, secret string) error {
	adm, err := m.admin()
	if err != nil {
		return err
	}
	if err := adm.AddUser(ctx, name, secret); err != nil {
		return fmt.Errorf("harness: set MinIO user %s's secret: %w", name, err)
	}
	return nil
}

func (m *MinIO) admin() (*madmin.AdminClient, error) {
	u, err := url.Parse(m.Endpoint)
	if err != nil {
		return nil, err
	}
	adm, err := madmin.NewWithOptions(u.Host, &madmin.Options{
		Creds:  miniocreds.NewStaticV4(m.AccessKey, m.SecretKey, ""),
		Secure: u.Scheme == "https",
	})
	if err != nil {
		return nil, fmt.Errorf("harness: MinIO admin client: %w", err)
	}
	return adm, nil
}
