package imagedist

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/hwk-dev/hwk/pkg/version"
)

// Registry is how hwk talks to registries: credentials from Docker's
// config (~/.docker/config.json, $DOCKER_CONFIG, credential helpers), the
// system's trusted CAs, plain HTTP only for registries on this machine's
// loopback that do not speak TLS (as Docker allows).
type Registry struct {
	// Credentials are looked up per registry host; nil reads Docker's
	// config on first use.
	Credentials credentials.Store
	// RootCAs, when set, replaces the system's trusted CAs (tests).
	RootCAs *x509.CertPool

	once     sync.Once
	err      error
	client   *auth.Client
	plainMu  sync.Mutex
	plain    map[string]bool
	credFrom string
}

func (r *Registry) init() error {
	r.once.Do(func() {
		if r.Credentials == nil {
			store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
			if err != nil {
				r.err = fmt.Errorf("read Docker's credentials: %w", err)
				return
			}
			r.Credentials = store
			r.credFrom = "Docker's config"
		}
		base := http.DefaultTransport.(*http.Transport).Clone()
		if r.RootCAs != nil {
			base.TLSClientConfig = &tls.Config{RootCAs: r.RootCAs, MinVersion: tls.VersionTLS12}
		}
		r.client = &auth.Client{
			Client:     &http.Client{Transport: retry.NewTransport(base)},
			Header:     http.Header{"User-Agent": {"hwk/" + version.Version}},
			Cache:      auth.NewCache(),
			Credential: credentials.Credential(r.Credentials),
		}
		r.plain = map[string]bool{}
	})
	return r.err
}

// ParseRef reads a node image reference the way Docker does
// (`hwkdev/node:v1` is on docker.io), and requires a tag or a digest.
func ParseRef(s string) (registry.Reference, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return registry.Reference{}, fmt.Errorf("%q is not an image reference: %w", s, err)
	}
	if _, ok := named.(reference.Tagged); !ok {
		if _, ok := named.(reference.Digested); !ok {
			return registry.Reference{}, fmt.Errorf("%q names no tag or digest; add one, e.g. %s:v1.35.4", s, s)
		}
	}
	ref, err := registry.ParseReference(named.String())
	if err != nil {
		return registry.Reference{}, fmt.Errorf("%q is not an image reference: %w", s, err)
	}
	return ref, nil
}

// repository opens ref's repository. A registry on loopback that answers
// plain HTTP is spoken to in plain HTTP; everything else needs TLS.
func (r *Registry) repository(ctx context.Context, ref registry.Reference) (*remote.Repository, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	repo := &remote.Repository{Client: r.client, Reference: ref}
	if loopback(ref.Host()) {
		plain, err := r.plainHTTP(ctx, ref.Host())
		if err != nil {
			return nil, r.explain(ref, err)
		}
		repo.PlainHTTP = plain
	}
	return repo, nil
}

// plainHTTP finds out, once per host, whether a loopback registry speaks
// TLS.
func (r *Registry) plainHTTP(ctx context.Context, host string) (bool, error) {
	r.plainMu.Lock()
	defer r.plainMu.Unlock()
	if p, ok := r.plain[host]; ok {
		return p, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/v2/", nil)
	if err != nil {
		return false, err
	}
	resp, err := r.client.Client.Do(req)
	if err == nil {
		resp.Body.Close()
		r.plain[host] = false
		return false, nil
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		r.plain[host] = true
		return true, nil
	}
	return false, err
}

func loopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// fetchRange GETs a blob from offset on, for a resumed download, on oras's
// authenticated client (the distribution spec's blob GET with a Range
// header). It returns the offset the body starts at: 0 when the registry
// ignores ranges.
func (r *Registry) fetchRange(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, offset int64) (io.ReadCloser, int64, error) {
	// Why not oras's seekable reader: it first opens the whole blob and
	// only then asks for a range, which makes the registry send bytes the
	// pull already has.
	ref := repo.Reference
	ref.Reference = desc.Digest.String()
	ctx = auth.AppendRepositoryScope(ctx, ref, auth.ActionPull)
	scheme := "https"
	if repo.PlainHTTP {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: ref.Host(), Path: "/v2/" + ref.Repository + "/blobs/" + ref.Reference}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		var start, end, size int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &start, &end, &size); err != nil || start != offset || size != desc.Size {
			resp.Body.Close()
			return nil, 0, fmt.Errorf("GET %s: answered Content-Range %q to a request for bytes %d-", u.Redacted(), resp.Header.Get("Content-Range"), offset)
		}
		return resp.Body, offset, nil
	case http.StatusOK:
		return resp.Body, 0, nil
	case http.StatusNotFound:
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%s: %w", desc.Digest, errdef.ErrNotFound)
	default:
		defer resp.Body.Close()
		return nil, 0, &errcode.ErrorResponse{Method: req.Method, URL: req.URL, StatusCode: resp.StatusCode}
	}
}

// RegistryError is a registry that refused or could not be reached, with
// what to do about it.
type RegistryError struct {
	Host string
	Err  error
	Fix  string
}

func (e *RegistryError) Error() string {
	msg := fmt.Sprintf("registry %s: %v", e.Host, e.Err)
	if e.Fix != "" {
		msg += "\n  fix: " + e.Fix
	}
	return msg
}

func (e *RegistryError) Unwrap() error { return e.Err }

// explain turns a registry call's error into one that names the registry
// and what to do.
func (r *Registry) explain(ref registry.Reference, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var re *RegistryError
	if errors.As(err, &re) {
		return err
	}
	host := ref.Registry
	var resp *errcode.ErrorResponse
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var opErr *net.OpError
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return &RegistryError{Host: host, Err: fmt.Errorf("needs credentials, and %s has none for it", r.credSource()),
			Fix: fmt.Sprintf("`docker login %s` (hwk reads Docker's credentials)", host)}
	case errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		if cred, cerr := r.Credentials.Get(context.Background(), host); cerr == nil && cred != (auth.Credential{}) {
			who := cred.Username
			if who == "" {
				who = "a token"
			}
			return &RegistryError{Host: host, Err: fmt.Errorf("refused the credentials hwk sent (%s, from %s): %w", who, r.credSource(), err),
				Fix: fmt.Sprintf("log in again with the right ones: `docker login %s`", host)}
		}
		return &RegistryError{Host: host, Err: fmt.Errorf("needs credentials, and %s has none for it: %w", r.credSource(), err),
			Fix: fmt.Sprintf("`docker login %s` (hwk reads Docker's credentials)", host)}
	case errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden:
		return &RegistryError{Host: host, Err: fmt.Errorf("denied access to %s: %w", ref.Repository, err),
			Fix: "use an account with pull (or, for push, write) access to that repository"}
	case errors.Is(err, errdef.ErrNotFound):
		return &RegistryError{Host: host, Err: fmt.Errorf("has no %s: %w", ref, err)}
	case errors.As(err, &unknownCA), errors.As(err, &hostErr):
		return &RegistryError{Host: host, Err: fmt.Errorf("its TLS certificate is not trusted here: %w", err),
			Fix: "add the registry's CA to this machine's trusted certificates (on Linux and macOS, SSL_CERT_FILE=ca.pem also works)"}
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &opErr):
		return &RegistryError{Host: host, Err: fmt.Errorf("cannot be reached: %w", err),
			Fix: "check the address and your network (and any proxy in HTTPS_PROXY)"}
	}
	return &RegistryError{Host: host, Err: err}
}

func (r *Registry) credSource() string {
	if r.credFrom != "" {
		return r.credFrom
	}
	return "the credential store"
}
