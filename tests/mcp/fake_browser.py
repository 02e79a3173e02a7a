"""A browser for the OAuth tests ($BROWSER): opens the authorization URL and follows
its redirect to bastion's loopback callback, as a user clicking "Allow" does.
`FAKE_BROWSER=forge` changes the redirect's `state` first (a forged redirect)."""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request


class Stop(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # (the redirect is followed by hand below)


def main(url: str) -> None:
    opener = urllib.request.build_opener(Stop)
    try:
        opener.open(url, timeout=20)
        raise SystemExit("the authorization page did not redirect")
    except urllib.error.HTTPError as exc:
        target = exc.headers["Location"]
    if os.environ.get("FAKE_BROWSER") == "forge":
        parts = urllib.parse.urlsplit(target)
        query = dict(urllib.parse.parse_qsl(parts.query))
        query["state"] = "forged-" + query.get("state", "")
        target = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
    with urllib.request.urlopen(target, timeout=20) as page:
        page.read()


if __name__ == "__main__":
    main(sys.argv[1])
