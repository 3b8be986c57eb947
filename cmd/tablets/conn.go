package main

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// Environment variables.
const (
	envConnectionString = "AZURE_TABLES_CONNECTION_STRING"
	envAccountURL       = "AZURE_TABLES_ACCOUNT_URL"
)

// connFlags say which account to talk to.
type connFlags struct {
	connectionString string
	accountURL       string
}

func addConnFlags(cmd *cobra.Command, c *connFlags) {
	f := cmd.Flags()
	f.StringVar(&c.connectionString, "connection-string", "",
		"storage account connection string (default $"+envConnectionString+")")
	f.StringVar(&c.accountURL, "account-url", "",
		"table service URL, https://ACCOUNT.table.core.windows.net, signed in with Azure AD\n(DefaultAzureCredential; default $"+envAccountURL+")")
}

// errNoConnection is the error of a command that needs an account and was given none.
var errNoConnection = errors.New("no storage account: set $" + envConnectionString +
	" or pass --connection-string, or pass --account-url https://ACCOUNT.table.core.windows.net to sign in with Azure AD")

// resolve applies the environment defaults. ok is false when no account is named.
func (c connFlags) resolve(cmd *cobra.Command, env func(string) string) (connFlags, bool, error) {
	if c.connectionString != "" && c.accountURL != "" {
		return c, false, usageErrorf(cmd, "--connection-string and --account-url are exclusive")
	}
	if c.connectionString == "" && c.accountURL == "" {
		if cs := env(envConnectionString); cs != "" {
			c.connectionString = cs
		} else {
			c.accountURL = env(envAccountURL)
		}
	}
	if c.accountURL != "" {
		u, err := url.Parse(c.accountURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return c, false, usageErrorf(cmd, "--account-url %q is not a URL like https://ACCOUNT.table.core.windows.net", c.accountURL)
		}
	}
	return c, c.connectionString != "" || c.accountURL != "", nil
}

// describe names the account for messages, without secrets.
func (c connFlags) describe() string {
	if c.accountURL != "" {
		return c.accountURL + " (Azure AD)"
	}
	fields := map[string]string{}
	for _, part := range strings.Split(c.connectionString, ";") {
		k, v, _ := strings.Cut(part, "=")
		fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if e := fields["tableendpoint"]; e != "" {
		return e
	}
	if a := fields["accountname"]; a != "" {
		return "account " + a
	}
	return "the account of the connection string"
}

// serviceClient returns a client for the account, with tablets' reply policy
// (tablets.ClientOptions); transport nil means the SDK's default.
func (c connFlags) serviceClient(transport policy.Transporter) (*aztables.ServiceClient, error) {
	opts := tablets.ClientOptions(nil)
	if transport != nil {
		opts.Transport = transport
	}
	if c.connectionString != "" {
		sc, err := aztables.NewServiceClientFromConnectionString(c.connectionString, opts)
		if err != nil {
			return nil, fmt.Errorf("connection string: %w", err)
		}
		return sc, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("azure AD credential: %w", err)
	}
	sc, err := aztables.NewServiceClient(strings.TrimRight(c.accountURL, "/"), cred, opts)
	if err != nil {
		return nil, fmt.Errorf("account URL: %w", err)
	}
	return sc, nil
}

var tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{2,62}$`)

// storeFlags are the flags of every command that works on one table.
type storeFlags struct {
	conn            connFlags
	table           string
	db              string
	rawPeriod       time.Duration
	rawRetention    time.Duration
	layout          string
	resolution      time.Duration
	concurrency     int
	partitionFactor time.Duration
	rowFactor       time.Duration
	transport       policy.Transporter // under a --db database's requests (nil: the SDK's)
}

func addStoreFlags(cmd *cobra.Command, s *storeFlags) {
	addConnFlags(cmd, &s.conn)
	f := cmd.Flags()
	f.StringVar(&s.table, "table", "", "table name (or --db): letters and digits, 3-63 characters, starting with a letter")
	f.StringVar(&s.db, "db", "", "database name (or --table): a tsdb database of raw tables per period;\nletters and digits, 3-40 characters, starting with a letter")
	f.DurationVar(&s.rawPeriod, "raw-period", 0, "--db: span of one raw table (0: 168h); as the database was written")
	f.DurationVar(&s.rawRetention, "raw-retention", 0, "--db: raw tables whose span is older are dropped by 'tablets retain',\nand older points refused (0: keep forever)")
	f.StringVar(&s.layout, "layout", "", "store layout: "+strings.Join(layoutNames(), ", ")+" (default "+defaultLayout+" for --table)"+
		"\n(read with the layout and options the series was written with); with --db, name it only for\na database made before tsdb recorded its raw format (default: the database's own)")
	f.DurationVar(&s.resolution, "resolution", 0, "store time resolution (0: the layout's default)")
	f.IntVar(&s.concurrency, "concurrency", 0, "requests in flight per call (0: the layout's default)")
	f.DurationVar(&s.partitionFactor, "partition-factor", 0, "advanced and chunked layouts: time span of a partition (0: default)")
	f.DurationVar(&s.rowFactor, "row-factor", 0, "advanced layout: time span of a row (0: default)")
}

// open checks the flags and returns the store and its client (whose table may not exist;
// nil for a --db database, which creates its tables itself).
func (s *storeFlags) open(cmd *cobra.Command, a *app) (tablets.Store, *aztables.Client, error) {
	if s.db != "" {
		if s.table != "" {
			return nil, nil, usageErrorf(cmd, "--table and --db are exclusive")
		}
		db, err := s.openDB(cmd, a)
		return db, nil, err
	}
	if s.rawPeriod != 0 || s.rawRetention != 0 {
		return nil, nil, usageErrorf(cmd, "--raw-period and --raw-retention are options of --db")
	}
	if s.table == "" {
		return nil, nil, usageErrorf(cmd, "--table or --db is required")
	}
	if !tableName.MatchString(s.table) {
		return nil, nil, usageErrorf(cmd, "--table %q is not a valid table name (letters and digits, 3-63 characters, starting with a letter)", s.table)
	}
	name := s.layout
	if name == "" {
		name = defaultLayout
	}
	def, err := findLayout(name)
	if err != nil {
		return nil, nil, usageErrorf(cmd, "%v", err)
	}
	conn, ok, err := s.conn.resolve(cmd, a.env)
	if err != nil {
		return nil, nil, err
	}
	opts := layoutOptions{
		Resolution:      s.resolution,
		Concurrency:     s.concurrency,
		PartitionFactor: s.partitionFactor,
		RowFactor:       s.rowFactor,
	}
	if !ok {
		// Bad options first: they are the user's to fix whatever the account.
		if offline, err := aztables.NewClientWithNoCredential("https://account.invalid/"+s.table, nil); err == nil {
			if _, err := def.open(offline, opts); errors.Is(err, tablets.ErrInvalidOptions) {
				return nil, nil, usageErrorf(cmd, "%v", err)
			}
		}
		return nil, nil, errNoConnection
	}
	sc, err := conn.serviceClient(nil)
	if err != nil {
		return nil, nil, err
	}
	client := sc.NewClient(s.table)
	store, err := def.open(client, opts)
	if errors.Is(err, tablets.ErrInvalidOptions) {
		return nil, nil, usageErrorf(cmd, "%v", err)
	}
	if err != nil {
		return nil, nil, err
	}
	return store, client, nil
}

// openDB opens the --db database: its raw tables of its own format, or of the --layout
// named for a database made before tsdb recorded its format.
func (s *storeFlags) openDB(cmd *cobra.Command, a *app) (*tsdb.DB, error) {
	opts := layoutOptions{Resolution: s.resolution, Concurrency: s.concurrency, PartitionFactor: s.partitionFactor, RowFactor: s.rowFactor}
	layout, err := dbLayout(s.layout, opts)
	if err != nil {
		return nil, usageErrorf(cmd, "%v", err)
	}
	dbOpts := &tsdb.Options{
		Layout:       layout,
		RawPeriod:    s.rawPeriod,
		RawRetention: s.rawRetention,
	}
	conn, ok, err := s.conn.resolve(cmd, a.env)
	if err != nil {
		return nil, err
	}
	// Bad options first: they are the user's to fix whatever the account.
	if err := tsdb.CheckOptions(s.db, dbOpts); err != nil {
		return nil, usageErrorf(cmd, "%v", err)
	}
	if !ok {
		return nil, errNoConnection
	}
	sc, err := conn.serviceClient(s.transport)
	if err != nil {
		return nil, err
	}
	db, err := tsdb.Open(cmd.Context(), sc, s.db, dbOpts)
	if errors.Is(err, tablets.ErrInvalidOptions) {
		return nil, usageErrorf(cmd, "%v", err)
	}
	return db, err
}
