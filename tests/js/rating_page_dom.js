// Drive a rating page (protocols/analysis/rating_page.py) in jsdom, as a rater at a keyboard would.
//
// node rating_page_dom.js PAGE.html STEPS.json  ->  JSON on stdout: a snapshot of the page after every step, the
// files the page offered to download (name and text), and any script error. Steps:
//   {"key": "3"} (with "ctrl": true for Ctrl+key)  a keydown on the focused element, as the browser sends it
//   {"type": "ana"}        text typed into the focused field (its value grows, an input event fires)
//   {"click": "save"}      a click on the element with that id
//   {"click_scale": 2}     a click on the third value of the scale
//   {"reload": true}       the page opened again, with what it kept in local storage
// jsdom's URL.createObjectURL and link navigation do not exist; the driver stands in for both (it records the
// Blob and the link's download name) and reads the Blob back with FileReader.
"use strict";

const fs = require("fs");
const { JSDOM, VirtualConsole } = require("jsdom");

const [pagePath, stepsPath] = process.argv.slice(2);
const html = fs.readFileSync(pagePath, "utf8");
const steps = JSON.parse(fs.readFileSync(stepsPath, "utf8"));
const errors = [];
const offered = []; // {name, text: a promise of the file's text}
let kept = {}; // local storage carried across a reload

function open() {
  const virtualConsole = new VirtualConsole();
  virtualConsole.on("jsdomError", (e) => errors.push(String((e && e.stack) || e)));
  virtualConsole.on("error", (...args) => errors.push(args.map(String).join(" ")));
  const dom = new JSDOM(html, {
    runScripts: "dangerously",
    url: "http://localhost/sheet.html", // an origin, so local storage works (the page is never fetched)
    virtualConsole,
    beforeParse(window) {
      for (const [k, v] of Object.entries(kept)) window.localStorage.setItem(k, v);
      let blobs = [];
      window.URL.createObjectURL = (blob) => {
        blobs.push(blob);
        return "blob:lca-test/" + blobs.length;
      };
      window.URL.revokeObjectURL = () => {};
      window.HTMLAnchorElement.prototype.click = function () {
        const n = Number(String(this.href).split("/").pop());
        offered.push({ name: this.download, text: readBlob(window, blobs[n - 1]) });
      };
      window.addEventListener("error", (ev) => errors.push(String(ev.message)));
    },
  });
  return dom.window;
}

function snapshot(window) {
  const doc = window.document;
  const chosen = [...doc.querySelectorAll("#scale button")].findIndex((b) => b.className === "chosen");
  return {
    position: doc.getElementById("position").textContent,
    shown: [...doc.querySelectorAll("#fields .field-text")].map((e) => e.textContent),
    labels: [...doc.querySelectorAll("#fields .field-label")].map((e) => e.textContent),
    buttons: [...doc.querySelectorAll("#scale button")].map((b) => b.textContent),
    chosen: chosen < 0 ? null : chosen,
    notes: doc.getElementById("notes").value,
    rater: doc.getElementById("rater").value,
    status: doc.getElementById("status").textContent,
    active: doc.activeElement ? doc.activeElement.id || doc.activeElement.tagName : null,
    help_hidden: doc.getElementById("help").hidden,
    title: doc.title,
    scripts: doc.querySelectorAll("script").length,
    bold: doc.querySelectorAll("#fields b").length, // markup in an answer must stay text
    offered: offered.length,
  };
}

function readBlob(window, blob) {
  return new Promise((resolve, reject) => {
    const reader = new window.FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsText(blob);
  });
}

(async () => {
  let window = open();
  const snapshots = [snapshot(window)];
  for (const step of steps) {
    const doc = window.document;
    const target = doc.activeElement || doc.body;
    if (step.key !== undefined) {
      const ev = new window.KeyboardEvent("keydown", {
        key: step.key, ctrlKey: !!step.ctrl, bubbles: true, cancelable: true,
      });
      target.dispatchEvent(ev);
    } else if (step.type !== undefined) {
      target.value += step.type;
      target.dispatchEvent(new window.Event("input", { bubbles: true }));
    } else if (step.click !== undefined) {
      doc.getElementById(step.click).click();
    } else if (step.click_scale !== undefined) {
      doc.querySelectorAll("#scale button")[step.click_scale].click();
    } else if (step.reload) {
      kept = {};
      for (let i = 0; i < window.localStorage.length; i++) {
        const k = window.localStorage.key(i);
        kept[k] = window.localStorage.getItem(k);
      }
      window.close();
      window = open();
    } else {
      throw new Error("unknown step " + JSON.stringify(step));
    }
    snapshots.push(snapshot(window));
  }
  const downloads = [];
  for (const file of offered) downloads.push({ name: file.name, text: await file.text });
  process.stdout.write(JSON.stringify({ snapshots, downloads, errors }));
  window.close();
})().catch((e) => {
  process.stdout.write(JSON.stringify({ snapshots: [], downloads: [], errors: [String(e.stack || e)] }));
  process.exitCode = 1;
});
