// The run page's live view: it follows the run's events as the server
// sends them (server-sent events), appends them to the events list, shows
// the latest stop line, and reloads the page once the run has stopped, so
// that the rest of the page (messages, timeline, tables) is drawn again by
// the server. Text from the server is only ever set as text, never as HTML.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource) {
    return;
  }
  var runID = live.getAttribute("data-run-id");
  var after = live.getAttribute("data-after") || "0";
  var list = document.getElementById("events");
  var status = document.getElementById("run-status");
  var src = new EventSource("/runs/" + encodeURIComponent(runID) + "/live?after=" + encodeURIComponent(after));
  var changed = false;
  // A form sent from this page (approve, deny) takes the person to the
  // page it answers with; a reload for the end of the run would cut that
  // navigation off, and its message with it. So the live view stops.
  var leaving = false;
  document.addEventListener("submit", function () {
    leaving = true;
    src.close();
  });
  src.addEventListener("event", function (e) {
    var ev = JSON.parse(e.data);
    changed = true;
    if (list) {
      var li = document.createElement("li");
      li.setAttribute("data-seq", String(ev.seq));
      var code = document.createElement("code");
      code.textContent = String(ev.seq);
      li.appendChild(code);
      li.appendChild(document.createTextNode(" " + ev.kind + " " + ev.at));
      if (ev.cut) {
        // A large event comes cut short, as on the page: link the whole.
        li.appendChild(document.createTextNode(" " + ev.cut.bytes + " bytes: its long text is cut short on this page; "));
        var a = document.createElement("a");
        a.setAttribute("href", ev.cut.whole);
        a.textContent = "the whole event";
        li.appendChild(a);
      }
      list.appendChild(li);
    }
  });
  src.addEventListener("summary", function (e) {
    var s = JSON.parse(e.data);
    if (status) {
      status.textContent = s.stop_line;
      status.setAttribute("data-status", s.status);
    }
  });
  src.addEventListener("end", function () {
    src.close();
    if (failed) {
      live.textContent = "Live updates stopped: " + failed + " Reload the page to try again.";
      return;
    }
    live.textContent = "The run has stopped.";
    if (changed && !leaving) {
      window.location.reload();
    }
  });
  // "error" is both the browser's (the connection failed; it reconnects
  // unless the answer was not a stream) and the server's (the log could
  // not be read or sent; an "end" follows): the server's carries data.
  var failed = "";
  src.addEventListener("error", function (e) {
    if (e.data) {
      try {
        failed = JSON.parse(e.data).error || "";
      } catch (err) {
        failed = String(e.data);
      }
      return;
    }
    if (src.readyState === EventSource.CLOSED) {
      live.textContent = "Live updates stopped; reload the page to see more.";
    }
  });
})();
