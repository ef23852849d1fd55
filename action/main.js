// The Action's main step: action/up.sh installs hwk and makes the cluster.
'use strict';

process.exitCode = require('./run.js').runScript('up.sh');
