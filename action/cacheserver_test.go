package action

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// cacheServer is a stand-in for the Actions cache service's v1 REST API
// (_apis/artifactcache), the one @actions/cache talks to when
// ACTIONS_CACHE_URL is set and ACTIONS_CACHE_SERVICE_V2 is not, as under
// nektos/act, whose artifactcache handler serves the same routes: look
// up by keys and version, reserve an entry, upload it in ranges, commit
// it, download it. Entries live in memory.
type cacheServer struct {
	mu      sync.Mutex
	url     string
	entries map[int]*cacheEntry
	log     []string
}

type cacheEntry struct {
	key, version string
	data         []byte
	committed    bool
}

const cacheAPI = "/_apis/artifactcache/"

func (c *cacheServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[int]*cacheEntry{}
	}
	p := strings.TrimPrefix(r.URL.Path, cacheAPI)
	if p != r.URL.Path && r.Header.Get("Authorization") != "Bearer fake-runtime-token" {
		http.Error(w, "no runtime token", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodGet && p == "cache":
		// Keys in order, the first match wins, as the service does (it
		// also matches prefixes, which the Action does not ask for).
		version := r.URL.Query().Get("version")
		for _, k := range strings.Split(r.URL.Query().Get("keys"), ",") {
			for id, e := range c.entries {
				if e.committed && e.key == k && e.version == version {
					c.log = append(c.log, "hit "+k)
					json.NewEncoder(w).Encode(map[string]string{"cacheKey": k, "archiveLocation": fmt.Sprintf("%s/archive/%d", c.url, id)})
					return
				}
			}
		}
		c.log = append(c.log, "miss "+r.URL.Query().Get("keys"))
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && p == "caches":
		var req struct{ Key, Version string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, e := range c.entries {
			if e.key == req.Key && e.version == req.Version {
				http.Error(w, "already reserved", http.StatusConflict)
				return
			}
		}
		id := len(c.entries) + 1
		c.entries[id] = &cacheEntry{key: req.Key, version: req.Version}
		c.log = append(c.log, "reserve "+req.Key)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]int{"cacheId": id})
	case strings.HasPrefix(p, "caches/"):
		id, _ := strconv.Atoi(strings.TrimPrefix(p, "caches/"))
		e := c.entries[id]
		if e == nil || e.committed {
			http.Error(w, "no such reservation", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPatch {
			// Content-Range: bytes START-END/*
			var start, end int
			if _, err := fmt.Sscanf(r.Header.Get("Content-Range"), "bytes %d-%d/*", &start, &end); err != nil {
				http.Error(w, "bad Content-Range", http.StatusBadRequest)
				return
			}
			chunk := make([]byte, end-start+1)
			if _, err := io.ReadFull(r.Body, chunk); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if len(e.data) < end+1 {
				e.data = append(e.data, make([]byte, end+1-len(e.data))...)
			}
			copy(e.data[start:], chunk)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		var req struct{ Size int }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Size != len(e.data) {
			http.Error(w, fmt.Sprintf("size %d, uploaded %d", req.Size, len(e.data)), http.StatusBadRequest)
			return
		}
		e.committed = true
		c.log = append(c.log, "commit "+e.key)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/archive/"):
		id, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/archive/"))
		e := c.entries[id]
		if e == nil || !e.committed {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(e.data)))
		w.Write(e.data)
	default:
		http.Error(w, "not served here: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

// events is what the server was asked, in order.
func (c *cacheServer) events() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}
