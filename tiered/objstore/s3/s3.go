// Package s3 is an objstore.Store on an S3-compatible bucket (AWS S3, MinIO, versitygw,
// Ceph RGW, ...), through AWS's Go SDK v2.
//
// The client is aws-sdk-go-v2's service/s3, built from its Options alone (not the SDK's
// config package, which would pull in SSO, IMDS and shared-config loading the broker does
// not want): the region, endpoint, path-style addressing, credentials and HTTP client are
// all Shale's configuration. Payload signing needs a seekable body over plain HTTP, and
// the SDK's default trailing checksums (aws-chunked uploads) are not spoken by every
// S3-compatible server, so checksums are computed only when an operation requires them.
package s3

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shalelog/shale/tiered/objstore"
)

// Config says where the bucket is and how to reach it.
type Config struct {
	// Endpoint is the S3 service URL, such as https://s3.eu-west-1.amazonaws.com or
	// http://127.0.0.1:7070. Plain http is accepted for loopback hosts only, unless
	// AllowHTTP is set: object data would cross the network unencrypted.
	Endpoint string
	// Bucket is the bucket's name.
	Bucket string
	// Region is the bucket's region, used in request signatures ("us-east-1" if empty;
	// most S3-compatible servers accept any).
	Region string
	// Prefix is put before every key, so that several clusters can share a bucket. A
	// "/" is added when it does not end with one.
	Prefix string
	// CredentialsFile is a file in the format of AWS's shared credentials file
	// (~/.aws/credentials): an INI section per profile with aws_access_key_id,
	// aws_secret_access_key and optionally aws_session_token. It is read again at most
	// once a minute, so that rotated credentials are taken up without a restart. Empty:
	// the environment's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
	CredentialsFile string
	// Profile is the section of CredentialsFile to use ("default" if empty).
	Profile string
	// PathStyle addresses the bucket as ENDPOINT/BUCKET/KEY rather than as
	// BUCKET.ENDPOINT/KEY: what most S3-compatible servers, and any endpoint given by IP
	// address, need.
	PathStyle bool
	// CAFile is a PEM file of certificate authorities trusted for the endpoint, in
	// addition to the system's.
	CAFile string
	// AllowHTTP permits a plain-http Endpoint that is not a loopback address.
	AllowHTTP bool
	// Timeout bounds one request (30s if zero); a caller's context may end it sooner.
	Timeout time.Duration

	// Getenv reads the environment; nil means os.Getenv. Tests set it.
	Getenv func(string) string
}

// Store is an objstore.Store on an S3 bucket. It is safe for concurrent use.
type Store struct {
	client *awss3.Client
	bucket string
	prefix string
	region string
}

// New returns a Store for cfg. It does not contact the server.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket configured")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("s3: endpoint %q is not a URL", cfg.Endpoint)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !cfg.AllowHTTP && !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("s3: endpoint %s is plain http to a host that is not loopback; use https or set AllowHTTP", cfg.Endpoint)
		}
	default:
		return nil, fmt.Errorf("s3: endpoint %s: scheme must be http or https", cfg.Endpoint)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("s3: read CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("s3: CA file %s holds no PEM certificate", cfg.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	creds, err := credentialsProvider(cfg, getenv)
	if err != nil {
		return nil, err
	}
	prefix := cfg.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	client := awss3.New(awss3.Options{
		BaseEndpoint:               aws.String(strings.TrimSuffix(cfg.Endpoint, "/")),
		Region:                     region,
		UsePathStyle:               cfg.PathStyle,
		Credentials:                creds,
		HTTPClient:                 &http.Client{Transport: transport, Timeout: timeout},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return &Store{client: client, bucket: cfg.Bucket, prefix: prefix, region: region}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// credentialsProvider reads the keys from the credentials file (again at most once a
// minute) or, without one, once from the environment.
func credentialsProvider(cfg Config, getenv func(string) string) (aws.CredentialsProvider, error) {
	if cfg.CredentialsFile == "" {
		c := aws.Credentials{
			AccessKeyID:     getenv("AWS_ACCESS_KEY_ID"),
			SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"),
			SessionToken:    getenv("AWS_SESSION_TOKEN"),
			Source:          "environment",
		}
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return nil, errors.New("s3: no credentials file configured and AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY unset")
		}
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return c, nil }), nil
	}
	profile := cfg.Profile
	if profile == "" {
		profile = "default"
	}
	read := func(context.Context) (aws.Credentials, error) {
		c, err := readCredentialsFile(cfg.CredentialsFile, profile)
		if err != nil {
			return c, err
		}
		c.CanExpire, c.Expires = true, time.Now().Add(time.Minute)
		return c, nil
	}
	// Fail at startup on a file that is missing or incomplete, not at the first upload.
	if _, err := read(context.Background()); err != nil {
		return nil, err
	}
	return aws.NewCredentialsCache(aws.CredentialsProviderFunc(read)), nil
}

// readCredentialsFile parses the profile's section of an AWS shared credentials file.
func readCredentialsFile(path, profile string) (aws.Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("s3: read credentials file: %w", err)
	}
	c := aws.Credentials{Source: "file " + path}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' && line[len(line)-1] == ']' {
			section = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		if section != profile {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "aws_access_key_id":
			c.AccessKeyID = strings.TrimSpace(v)
		case "aws_secret_access_key":
			c.SecretAccessKey = strings.TrimSpace(v)
		case "aws_session_token":
			c.SessionToken = strings.TrimSpace(v)
		}
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return c, fmt.Errorf("s3: credentials file %s has no aws_access_key_id and aws_secret_access_key in [%s]", path, profile)
	}
	return c, nil
}

// isNotFound reports whether err says the key (or the object) does not exist.
func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound && !isNoSuchBucket(err)
}

func isNoSuchBucket(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket"
}

func isInvalidRange(err error) bool {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange"
}

func (s *Store) wrap(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("s3: %s %s: %w (%w)", op, key, objstore.ErrNotFound, err)
	}
	return fmt.Errorf("s3: %s %s: %w", op, key, err)
}

// Put implements objstore.Store. A body that is an io.ReadSeeker is streamed; any
// other is read into memory first, because signing a plain-http request reads the
// payload twice (once for its hash).
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	rs, ok := body.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(io.LimitReader(body, size+1))
		if err != nil {
			return fmt.Errorf("s3: put %s: %w", key, err)
		}
		rs = bytes.NewReader(b)
	}
	// The SDK would send whatever the reader holds; check the size as Memory does.
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	end, err := rs.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	if end-start != size {
		return fmt.Errorf("s3: put %s: body has %d bytes, want %d", key, end-start, size)
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	_, err = s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           aws.String(s.prefix + key),
		Body:          rs,
		ContentLength: aws.Int64(size),
	})
	if err != nil {
		return s.wrap("put", key, err)
	}
	return nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("s3: get %s: negative offset %d", key, off)
	}
	if n == 0 {
		// No Range expresses zero bytes; the object must still exist.
		if _, err := s.Head(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &awss3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)}
	switch {
	case n > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isInvalidRange(err) {
			// The range starts at or past the end: nothing there, as Memory says.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, s.wrap("get", key, err)
	}
	if n > 0 {
		// A server that ignores Range sends the whole object (status 200).
		if out.ContentRange == nil && off > 0 {
			out.Body.Close()
			return nil, fmt.Errorf("s3: get %s: the server ignored the byte range", key)
		}
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(out.Body, n), out.Body}, nil
	}
	return out.Body, nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Object, error) {
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil {
		return objstore.Object{}, s.wrap("head", key, err)
	}
	return objstore.Object{Key: key, Size: aws.ToInt64(out.ContentLength)}, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil && !isNotFound(err) {
		return s.wrap("delete", key, err)
	}
	return nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + prefix),
	})
	var out []objstore.Object
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if !ok {
				continue
			}
			out = append(out, objstore.Object{Key: k, Size: aws.ToInt64(o.Size)})
		}
	}
	return out, nil
}

// CreateBucket creates the bucket, if it does not exist: for tests and first setups.
func (s *Store) CreateBucket(ctx context.Context) error {
	in := &awss3.CreateBucketInput{Bucket: &s.bucket}
	if s.region != "us-east-1" { // the one region S3 refuses as a location constraint
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(s.region)}
	}
	_, err := s.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("s3: create bucket %s: %w", s.bucket, err)
	}
	return nil
}

var _ objstore.Store = (*Store)(nil)
